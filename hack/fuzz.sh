#!/usr/bin/env bash
# Runs every fuzz target of the module for a short time (FUZZTIME, default 10s each), starting from
# its seed corpus: the f.Add seeds and the files checked in under testdata/fuzz/<FuzzName>/.
#
#   hack/fuzz.sh                 every target
#   hack/fuzz.sh FuzzParse       targets whose name matches (a grep -E pattern)
#   hack/fuzz.sh --save-corpus   also copy up to 8 of the inputs each run found (the smallest) into
#                                testdata/fuzz/<FuzzName>/, to be reviewed and committed
#
# A failing input is written to testdata/fuzz/<FuzzName>/ by go test itself and the script fails.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=${GOTOOLCHAIN:-go1.27.3}
fuzztime=${FUZZTIME:-10s}
save=0
pattern=.
for arg in "$@"; do
  case $arg in
    --save-corpus) save=1 ;;
    -h | --help) sed -n '2,11p' "$0"; exit 0 ;;
    *) pattern=$arg ;;
  esac
done

# "package-dir FuzzName" for every fuzz target, in a stable order.
targets=$(grep -rEo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]+' . | grep -v '^./test/' |
  sed -E 's#^\./(.*)/[^/]+_test\.go:func (Fuzz[A-Za-z0-9_]+)#\1 \2#' | sort -u | grep -E " .*${pattern}" || true)
if [ -z "$targets" ]; then
  echo "fuzz: no fuzz target matches '$pattern'" >&2
  exit 1
fi
cache=$(go env GOCACHE)/fuzz
count=0
while read -r dir name; do
  count=$((count + 1))
  echo "== $name (./$dir, $fuzztime)"
  go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "./$dir"
  if [ "$save" = 1 ]; then
    found="$cache/$(go list "./$dir")/$name"
    if [ -d "$found" ]; then
      mkdir -p "$dir/testdata/fuzz/$name"
      # The smallest inputs: short files read best in review and keep the corpus small.
      find "$found" -type f -printf '%s %p\n' | sort -n | head -8 | cut -d' ' -f2- |
        while read -r f; do cp "$f" "$dir/testdata/fuzz/$name/"; done
    fi
  fi
done <<< "$targets"
echo "fuzz: $count targets ran for $fuzztime each without a failure"
