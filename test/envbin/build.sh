#!/usr/bin/env bash
# Builds kube-apiserver and etcd from the Go module proxy (envtest cannot download them here) into a
# cache folder outside the checkout, and prints that folder (the value for KUBEBUILDER_ASSETS) on stdout.
# A binary already in the cache is reused; delete the folder to rebuild.
set -euo pipefail

KUBE_VERSION=v1.35.4
ETCD_VERSION=v3.6.5
here=$(cd "$(dirname "$0")" && pwd)
cache=${STAGECOACH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/stagecoach}
assets="$cache/envtest-$KUBE_VERSION-etcd-$ETCD_VERSION"
mkdir -p "$assets"

build() { # name, package, version, ldflags
  local name=$1 pkg=$2 version=$3 ldflags=$4
  local out="$cache/bin/$name-$version"
  if [ ! -x "$out" ]; then
    echo "building $name $version from the Go module proxy (first time only; a few minutes on 2 cores)..." >&2
    local start=$SECONDS
    mkdir -p "$cache/bin"
    (cd "$here" && go build -mod=readonly -trimpath -ldflags "-s -w $ldflags" -o "$out.tmp" "$pkg")
    mv "$out.tmp" "$out"
    echo "built $name $version in $((SECONDS - start))s -> $out" >&2
  fi
  ln -sf "$out" "$assets/$name"
}

minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
ldf=""
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldf+=" -X $p.gitVersion=$KUBE_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean -X $p.buildDate=2026-01-01T00:00:00Z"
done
build kube-apiserver ./cmd/kube-apiserver "$KUBE_VERSION" "$ldf"
build etcd ./cmd/etcd "$ETCD_VERSION" ""
build kubectl ./cmd/kubectl "$KUBE_VERSION" "$ldf"
echo "$assets"
