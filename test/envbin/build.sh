#!/usr/bin/env bash
# Builds kube-apiserver, etcd and kubectl from the Go module proxy (envtest cannot download them here) into a
# cache folder outside the checkout, and prints that folder (the value for KUBEBUILDER_ASSETS) on stdout.
# A binary already in the cache is reused; delete it from the cache's bin folder to rebuild.
#
# Usage: build.sh [kube-controller-manager]
# The end-to-end stack also asks for kube-controller-manager, built from the same Kubernetes module
# (same go.mod, same version stamp) as kube-apiserver; the envtest suites do not need it, so it is
# built only when named.
set -euo pipefail

KUBE_VERSION=v1.35.4
ETCD_VERSION=v3.6.5
here=$(cd "$(dirname "$0")" && pwd)
cache=${STAGECOACH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/stagecoach}
assets="$cache/envtest-$KUBE_VERSION-etcd-$ETCD_VERSION"
mkdir -p "$assets"

minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
ldf=""
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldf+=" -X $p.gitVersion=$KUBE_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean -X $p.buildDate=2026-01-01T00:00:00Z"
done

# One go build for whatever is missing, so that packages the binaries share compile once
# (etcd does not link the version packages the -X flags name; the linker ignores those).
declare -A version=([kube-apiserver]=$KUBE_VERSION [etcd]=$ETCD_VERSION [kubectl]=$KUBE_VERSION [kube-controller-manager]=$KUBE_VERSION)
names=(kube-apiserver etcd kubectl)
for extra in "$@"; do
  case $extra in
    kube-controller-manager) names+=("$extra") ;;
    *) echo "build.sh: unknown binary '$extra': only kube-controller-manager may be added to kube-apiserver, etcd and kubectl" >&2; exit 2 ;;
  esac
done
missing=()
for name in "${names[@]}"; do
  [ -x "$cache/bin/$name-${version[$name]}" ] || missing+=("$name")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "building ${missing[*]} (kubernetes $KUBE_VERSION, etcd $ETCD_VERSION) from the Go module proxy (first time only; about 9 minutes on 2 cores alone, 10 beside the Argo CD build)..." >&2
  start=$SECONDS
  mkdir -p "$cache/bin"
  tmp=$(mktemp -d "$cache/bin/.envbin-XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  # `times` in the build's subshell: the CPU its children (go and every compiler it waited for) used,
  # printed beside the wall time (docs/testing.md's cold breakdown reads both).
  (cd "$here" && go build -mod=readonly -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w $ldf" -o "$tmp/" "${missing[@]/#/./cmd/}" && times >"$tmp/.cpu")
  cpu=$(awk 'NR==2 { n=0; for (i=1;i<=2;i++) { split($i,a,/[ms]/); n+=a[1]*60+a[2] } printf "%d", n }' "$tmp/.cpu")
  for name in "${missing[@]}"; do mv "$tmp/$name" "$cache/bin/$name-${version[$name]}"; done
  echo "built ${missing[*]} in $((SECONDS - start))s (${cpu}s CPU) -> $cache/bin" >&2
fi
for name in "${names[@]}"; do ln -sf "$cache/bin/$name-${version[$name]}" "$assets/$name"; done
echo "$assets"
