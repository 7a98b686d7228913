#!/usr/bin/env bash
# One-host steadiness of the all-reduce: N back-to-back runs of
#   athanor-bench-allreduce --nproc 2 --backend ucx --dtype f32
#       --min-bytes SIZE --max-bytes SIZE --check --baseline none
# then N of the same with --backend mpi (Open MPI), each a fresh pair of
# processes; prints every run's busbw (GB/s) and min / median / max, the
# slowest over the median, and ucx's median over mpi's. With --old BIN, also
# N runs of an older build's ucx, alternating with the new one run by run
# (the old-vs-new comparison of docs/benchmarks.md), and the ratio of medians.
#
#   bench/allreduce/steadiness.sh [-n 20] [--bin build/bin/athanor-bench-allreduce]
#       [--old /path/to/old/athanor-bench-allreduce] [--size 64M] [--no-mpi]
#
# Figures on a loaded machine are noise: the load average is printed at the
# start and the end, and every run's wall time beside its busbw.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
n=20 bin="$root/build/bin/athanor-bench-allreduce" old="" size=64M mpi=1
while [ $# -gt 0 ]; do
  case "$1" in
    -n) n="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --old) old="$2"; shift 2 ;;
    --size) size="$2"; shift 2 ;;
    --no-mpi) mpi=0; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "steadiness.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

# One run; prints "busbw wall_s" (busbw of the single size's row).
run() {
  local b="$1" backend="$2" out t0 t1
  t0=$(date +%s.%N)
  out=$("$b" --nproc 2 --backend "$backend" --dtype f32 --min-bytes "$size" --max-bytes "$size" \
        --check --baseline none 2>&1) || { echo "run failed: $out" >&2; exit 1; }
  t1=$(date +%s.%N)
  # The data row: size, count, type, redop, time, algbw, busbw, #wrong.
  echo "$out" | awk -v w="$(echo "$t1 - $t0" | bc)" \
    '$1 ~ /^[0-9]+$/ && NF >= 8 { if ($8 != 0) { print "wrong results" > "/dev/stderr"; exit 1 }
                                  printf "%s %.1f\n", $7, w }'
}

# "min median max" of the numbers on stdin.
stats() { sort -g | awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
                                              printf "%.2f %.2f %.2f\n", v[1], m, v[NR] }'; }

report() {  # name file
  read -r lo med hi < <(awk '{ print $1 }' "$2" | stats)
  printf "%-8s runs %2d  busbw GB/s min %6.2f  median %6.2f  max %6.2f  slowest/median %.2f\n" \
    "$1" "$(wc -l < "$2")" "$lo" "$med" "$hi" "$(echo "$lo / $med" | bc -l)"
}
median() { awk '{ print $1 }' "$1" | stats | awk '{ print $2 }'; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "# $(date -u +%FT%TZ) $(nproc) cores; load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# size $size, f32 sum, 2 ranks; each line: busbw (GB/s) and the run's wall time (s)"
for i in $(seq 1 "$n"); do
  r=$(run "$bin" ucx); echo "$r" >> "$tmp/ucx"; echo "ucx     $r"
  if [ -n "$old" ]; then r=$(run "$old" ucx); echo "$r" >> "$tmp/old"; echo "old-ucx $r"; fi
done
if [ "$mpi" = 1 ]; then
  for i in $(seq 1 "$n"); do r=$(run "$bin" mpi); echo "$r" >> "$tmp/mpi"; echo "mpi     $r"; done
fi
echo "# load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
report ucx "$tmp/ucx"
[ -n "$old" ] && report old-ucx "$tmp/old"
[ "$mpi" = 1 ] && report mpi "$tmp/mpi"
[ "$mpi" = 1 ] && printf "ucx median / mpi median: %.2f\n" "$(echo "$(median "$tmp/ucx") / $(median "$tmp/mpi")" | bc -l)"
[ -n "$old" ] && printf "new median / old median: %.2f\n" "$(echo "$(median "$tmp/ucx") / $(median "$tmp/old")" | bc -l)"
exit 0
