#!/usr/bin/env bash
# `--help` and `-h` at every level of the `athanor` command tree.
#
# Walks the tree from `athanor --help` down: every level's help lists its
# subcommands under a line ending in "commands:" as "  NAME ..." lines, up to a
# blank line (launcher/cli_help.h). Each level must answer exit 0 with a
# non-empty stdout that names it ("athanor admin token create"), nothing on
# stderr, and the same text for -h. The CLI is pointed at a CA and token file
# that do not exist and at a closed port: help that tried to reach a
# coordinator would fail.
#
# usage: cli_help_test.sh BIN_DIR
set -u
bin=$1/athanor
[[ -x $bin ]] || { echo "FAIL: $bin is not built"; exit 1; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export ATHANOR_COORDINATOR=127.0.0.1:1 ATHANOR_CA=$scratch/absent-ca.crt
export ATHANOR_TOKEN_FILE=$scratch/absent.token HOME=$scratch
unset ATHANOR_TOKEN

# The levels the walk must find: a guard against a walk that finds nothing.
# Update it when a command is added or removed.
expected_levels=57
failures=0
levels=0
queue=("")  # each entry: a level's words, space-separated ("" is the top)

fail() {
  echo "FAIL: athanor $1 --help: $2"
  failures=$((failures + 1))
}

while ((${#queue[@]} > 0)); do
  level=${queue[0]}
  queue=("${queue[@]:1}")
  read -r -a words <<<"$level"
  levels=$((levels + 1))
  # A watchdog per call: a help that blocks on the network fails fast.
  timeout 10 "$bin" "${words[@]}" --help >"$scratch/out" 2>"$scratch/err"
  rc=$?
  out=$(cat "$scratch/out")
  name="athanor${level:+ $level}"
  [[ $rc -eq 0 ]] || fail "$level" "exit $rc, expected 0 (stderr: $(head -c 300 "$scratch/err"))"
  [[ -n $out ]] || fail "$level" "printed nothing"
  [[ -s $scratch/err ]] && fail "$level" "wrote to stderr: $(head -c 300 "$scratch/err")"
  grep -qF -- "$name" "$scratch/out" || fail "$level" "does not name '$name'"
  timeout 10 "$bin" "${words[@]}" -h >"$scratch/short" 2>/dev/null
  rc=$?
  [[ $rc -eq 0 ]] || fail "$level" "-h: exit $rc, expected 0"
  cmp -s "$scratch/out" "$scratch/short" || fail "$level" "-h prints other text than --help"
  ((${#words[@]} < 4)) || { fail "$level" "the tree is deeper than 4 levels (a loop?)"; continue; }
  # Subcommands: "  NAME ..." lines after a "...commands:" line, to a blank line.
  while read -r sub; do
    queue+=("${level:+$level }$sub")
  done < <(awk '/commands:$/ { listing = 1; next }
                /^$/ { listing = 0 }
                listing && /^  [a-z]/ { print $1 }' "$scratch/out")
  echo "ok: $name"
done

if ((levels != expected_levels)); then
  echo "FAIL: walked $levels levels, expected $expected_levels (update expected_levels in $0 when commands change)"
  failures=$((failures + 1))
fi
echo "$levels levels, $failures failures"
((failures == 0))
