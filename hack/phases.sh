#!/usr/bin/env bash
# Where the minutes of `make test` go, phase by phase: wall time and CPU time (user+system of the
# phase's command and every process it waited for: go, the compilers, the test binaries).
#
#   hack/phases.sh run PHASE CMD...   run CMD (its stdout and stderr pass through), then append
#                                     "PHASE<TAB>wall<TAB>cpu<TAB>status<TAB>lane" to $STAGECOACH_PHASES
#                                     (lane: $STAGECOACH_PHASES_LANE, set when phases run side by side)
#   hack/phases.sh reset              empty $STAGECOACH_PHASES
#   hack/phases.sh report             print the phases recorded, their sum and the CPU/wall ratio
#
# On 2 cores a ratio near 2 means the phase kept both busy (compiling); near 0, it waited (tests
# sleeping, downloads). `make test` prints the report at its end; a cold run (empty caches) and a
# warm one differ mostly in the build phases (vet, e2e-build, envtest-assets). docs/testing.md
# keeps the last measured cold and warm reports.
set -uo pipefail

file=${STAGECOACH_PHASES:-${XDG_CACHE_HOME:-$HOME/.cache}/stagecoach/last-phases.tsv}

case ${1:-} in
run)
  [ $# -ge 3 ] || { echo "usage: phases.sh run PHASE CMD..." >&2; exit 2; }
  phase=$2; shift 2
  # A phase's own commands (tests that run make targets) record nothing: only the outer phases count.
  if [ -n "${STAGECOACH_PHASES_NESTED:-}" ]; then
    exec "$@"
  fi
  export STAGECOACH_PHASES_NESTED=1
  lane=${STAGECOACH_PHASES_LANE:-}
  unset STAGECOACH_PHASES_LANE
  mkdir -p "$(dirname "$file")"
  start=$(date +%s.%N)
  # The command runs in a subshell whose `times` reports the CPU of the children it waited for.
  cpufile=$(mktemp)
  ( "$@"; status=$?; times >"$cpufile"; exit $status )
  status=$?
  end=$(date +%s.%N)
  cpu=$(awk 'NR==2 { n=0; for (i=1;i<=2;i++) { split($i,a,/[ms]/); n+=a[1]*60+a[2] } printf "%.0f", n }' "$cpufile")
  rm -f "$cpufile"
  wall=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.0f", b - a }')
  printf '%s\t%s\t%s\t%s\t%s\n' "$phase" "$wall" "${cpu:-0}" "$status" "$lane" >>"$file"
  exit $status
  ;;
reset)
  mkdir -p "$(dirname "$file")"
  : >"$file"
  ;;
report)
  [ -s "$file" ] || { echo "phases: nothing recorded in $file"; exit 0; }
  # Phases of a lane ran beside the other lanes' (all lanes start together, and the next phase
  # waits for the last): their walls add up within a lane, and the longest lane counts once.
  awk -F'\t' -v cores="$(nproc)" '
    BEGIN { printf "== phases (wall, CPU, CPU/wall on %d cores)\n", cores }
    { wall[NR]=$2; cpu[NR]=$3; name[NR]=$1; st[NR]=$4; lane[NR]=$5; tc+=$3
      if ($5 == "") tw+=$2; else { lanewall[$5]+=$2; if (lanewall[$5] > longest) longest=lanewall[$5] } }
    END {
      for (i=1; i<=NR; i++) {
        label = lane[i] == "" ? name[i] : "| " name[i] " (" lane[i] ")"
        printf "  %-40s %7s %7s  %4.1f%s\n", label, fmt(wall[i]), fmt(cpu[i]), (wall[i] ? cpu[i]/wall[i] : 0), (st[i] != 0 ? "  (failed)" : "")
      }
      if (longest) printf "  %-40s %7s\n", "| side by side: the longest lane", fmt(longest)
      tw += longest
      printf "  %-40s %7s %7s  %4.1f\n", "total", fmt(tw), fmt(tc), (tw ? tc/tw : 0)
    }
    function fmt(s) { return sprintf("%dm%02ds", int(s/60), s%60) }
  ' "$file"
  ;;
*)
  echo "usage: phases.sh run PHASE CMD... | reset | report" >&2
  exit 2
  ;;
esac
