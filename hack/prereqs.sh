#!/usr/bin/env bash
# Checks, in the first seconds of `make demo`, `make test` and `.ci/run`, everything they need from the
# machine: the Go toolchain (GOTOOLCHAIN=go1.27.3 must run), git, make, a C compiler, redis-server
# (Argo CD's cache in the local stack), Node.js and npm (the UI extension), Chromium (its browser
# tests) and free disk for the build cache. One script, so the CI's installer and the developer's
# check never drift.
#
#   hack/prereqs.sh                  what `make test` needs; as root with apt-get, installs what is
#                                    missing from Debian and says so; as another user, stops at once
#                                    naming the command to run
#   hack/prereqs.sh --for demo       what `make demo` needs (no Node.js, npm or Chromium)
#   hack/prereqs.sh --for demo-ui    what `make demo ARGOCD_UI=1` needs (Node.js and npm, no Chromium)
#   hack/prereqs.sh --install        install even when STAGECOACH_INSTALL_PREREQS=0 says not to
#
# STAGECOACH_INSTALL_PREREQS=0 refuses to install (check only, even as root); =1 installs (root only).
# STAGECOACH_MIN_FREE_GIB (default 10) is the free space wanted under the cache folder
# ($STAGECOACH_CACHE, else ${XDG_CACHE_HOME:-$HOME/.cache}/stagecoach): the first build writes ~8 GiB
# of binaries and Go build cache there.
set -euo pipefail

install=${STAGECOACH_INSTALL_PREREQS:-auto}
purpose=test
while [ $# -gt 0 ]; do
  case $1 in
    --install) install=1 ;;
    --for)
      purpose=${2:-}
      shift
      case $purpose in
        test | demo | demo-ui) ;;
        *) echo "prereqs: --for takes test, demo or demo-ui, not '$purpose'" >&2; exit 2 ;;
      esac ;;
    -h | --help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "prereqs: unknown argument $1 (use --install, --for test|demo|demo-ui, or nothing)" >&2; exit 2 ;;
  esac
  shift
done
export GOTOOLCHAIN=${GOTOOLCHAIN:-go1.27.3}
min_free_gib=${STAGECOACH_MIN_FREE_GIB:-10}
cache=${STAGECOACH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/stagecoach}

have() { command -v "$1" >/dev/null 2>&1; }

# missing_packages prints the Debian packages for the tools that are not there, one a line.
missing_packages() {
  # go alone is not enough: GOTOOLCHAIN must be fetchable and runnable (Debian's golang-go is
  # 1.21 or newer, which fetches go1.27.3 from the module proxy itself).
  if ! have go; then echo golang-go
  elif ! go version >/dev/null 2>&1; then echo "go-toolchain"; fi
  have git || echo git
  have make || echo make
  { have cc || have gcc; } || echo build-essential
  have redis-server || echo redis-server
  # The Argo CD UI extension: built with npm (esbuild, vitest), tested in headless Chromium.
  if [ "$purpose" != demo ]; then
    have node || echo nodejs
    have npm || echo npm
  fi
  if [ "$purpose" = test ]; then
    have chromium || echo chromium
  fi
}

# Free disk where the cache lives (its nearest existing folder: the cache may not exist yet),
# reported together with any missing tool so that one run names every problem.
dir=$cache
while [ ! -d "$dir" ]; do dir=$(dirname "$dir"); done
free_kib=$(df -Pk "$dir" | awk 'NR==2 {print $4}')
free_gib=$((free_kib / 1024 / 1024))
disk_ok=1
if [ "$free_gib" -lt "$min_free_gib" ]; then
  disk_ok=0
  echo "prereqs: only $free_gib GiB free under $dir; the build cache $cache wants $min_free_gib GiB" >&2
  echo "prereqs: free some space there, or point STAGECOACH_CACHE at a filesystem with room (STAGECOACH_MIN_FREE_GIB=N to lower the bar)" >&2
fi

mapfile -t missing < <(missing_packages)

if [[ " ${missing[*]} " == *" go-toolchain "* ]]; then
  # Not a package: go is there but cannot run the pinned toolchain (no module proxy, or an old go).
  echo "prereqs: 'GOTOOLCHAIN=$GOTOOLCHAIN go version' fails:" >&2
  go version >&2 || true
  echo "prereqs: go $(GOTOOLCHAIN=local go env GOVERSION 2>/dev/null || echo '?') must reach the Go module proxy (GOPROXY=$(GOTOOLCHAIN=local go env GOPROXY 2>/dev/null)) to fetch $GOTOOLCHAIN, or install $GOTOOLCHAIN and put it first on PATH" >&2
  exit 1
fi

if [ "$install" = auto ]; then
  # As root on Debian (these machines, CI), install what is missing; elsewhere only say what.
  install=0
  if [ "$(id -u)" = 0 ] && have apt-get; then install=1; fi
fi

if [ ${#missing[@]} -gt 0 ]; then
  cmd="apt-get update -qq && apt-get install -y -qq ${missing[*]}"
  if [ "$install" != 1 ]; then
    [ "$(id -u)" = 0 ] || cmd="sudo sh -c '$cmd'"
    echo "prereqs: missing ${missing[*]} (git and redis-server serve the local stack: Argo CD's repo-server and cache)" >&2
    echo "prereqs: install them with:  $cmd" >&2
    echo "prereqs: (or, as root: hack/prereqs.sh --install)" >&2
    exit 1
  fi
  if [ "$(id -u)" != 0 ] || ! have apt-get; then
    echo "prereqs: --install needs root and apt-get (Debian); install ${missing[*]} yourself and run again" >&2
    exit 1
  fi
  echo "prereqs: installing ${missing[*]} from Debian as root (STAGECOACH_INSTALL_PREREQS=0 refuses)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
  mapfile -t still < <(missing_packages)
  if [ ${#still[@]} -gt 0 ]; then
    echo "prereqs: still missing after apt-get install: ${still[*]}" >&2
    exit 1
  fi
fi

[ "$disk_ok" = 1 ] || exit 1
case $purpose in
  test) tools="node $(node --version), chromium, " ;;
  demo-ui) tools="node $(node --version), " ;;
  demo) tools="" ;;
esac
echo "prereqs: ok ($(go env GOVERSION), git, make, cc, redis-server, ${tools}$free_gib GiB free for $cache)"
