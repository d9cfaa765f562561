#!/usr/bin/env bash
# A cold run of the test command, as a fresh machine makes it: a clean clone of HEAD and an empty
# HOME (no Go toolchain, module or build cache, npm cache or stack binaries), with only the
# machine's own settings copied in (git identity, npm and go env files). It prints the phase table
# `make test` ends with (hack/phases.sh) and the whole run's time; docs/testing.md keeps the last.
#
#   hack/cold-run.sh [DIR]   DIR (default /tmp/stagecoach-cold) is emptied and holds the clone and
#                            the HOME; about 66 minutes and 25 GB on 2 cores.
#
# It competes with whatever else runs: its wall times mean something on an otherwise idle machine.
set -euo pipefail
dir=${1:-/tmp/stagecoach-cold}
repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
rm -rf "$dir"
mkdir -p "$dir/home/.config"
for f in .gitconfig .npmrc; do [ -f "$HOME/$f" ] && cp "$HOME/$f" "$dir/home/"; done
[ -d "$HOME/.config/go" ] && cp -r "$HOME/.config/go" "$dir/home/.config/"
git clone -q "$repo" "$dir/repo"
cd "$dir/repo"
echo "cold run of $(git rev-parse --short HEAD) in $dir (HOME=$dir/home)"
start=$SECONDS
status=0
env -i HOME="$dir/home" PATH="$PATH" TERM=dumb CI=true ${NODE_EXTRA_CA_CERTS:+NODE_EXTRA_CA_CERTS="$NODE_EXTRA_CA_CERTS"} \
  bash .ci/run || status=$?
echo "cold .ci/run: exit $status after $((SECONDS - start))s"
exit $status
