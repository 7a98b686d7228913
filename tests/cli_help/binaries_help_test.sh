#!/usr/bin/env bash
# `--help` of every athanor-* program in BIN_DIR: exit 0 within 10 s, and a
# usage (a "usage" line or a flag table) that names the program, on stdout or
# stderr. The `athanor` CLI's own tree
# is cli_help_test.sh's. Help needs no privileges: run as root, each program
# runs as nobody, so one that ignores --help and starts its real work (a
# benchmark that makes sandboxes) fails without touching the machine.
#
# usage: binaries_help_test.sh BIN_DIR
set -u
dir=$1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cd "$scratch" || exit 1  # anything a program wrongly writes lands here
as_caller=()
if [[ $(id -u) -eq 0 ]] && command -v setpriv >/dev/null; then
  chmod 0777 "$scratch"
  as_caller=(setpriv --reuid=65534 --regid=65534 --clear-groups)
fi
# Programs this test must find; others named athanor-* are checked too.
required=(athanor-coordinator athanor-agent athanor-train athanor-run athanor-ckpt
          athanor-checkpoint-service athanor-sandbox-exec athanor-collectives-rank
          athanor-bench-allreduce athanor-bench-checkpoint athanor-bench-coordinator
          athanor-bench-progress athanor-bench-sandbox athanor-bench-scheduler
          athanor-bench-store athanor-bench-train)
failures=0
for p in "${required[@]}"; do
  [[ -x $dir/$p ]] || { echo "FAIL: $p is not built in $dir"; failures=$((failures + 1)); }
done
for path in "$dir"/athanor-*; do
  [[ -x $path && -f $path ]] || continue
  p=$(basename "$path")
  "${as_caller[@]}" timeout 10 "$path" --help >out 2>err
  rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "FAIL: $p --help: exit $rc, expected 0 (stderr: $(head -c 200 err))"
    failures=$((failures + 1))
  elif ! grep -qF -- "$p" out err; then
    echo "FAIL: $p --help: the usage does not name $p: $(head -c 200 out)"
    failures=$((failures + 1))
  elif ! grep -qiE -- 'usage|--help' out err; then
    # A usage line or a flag table (which lists --help itself).
    echo "FAIL: $p --help: printed no usage and no flags (did it run?): $(head -c 200 out)"
    failures=$((failures + 1))
  else
    echo "ok: $p"
  fi
done
echo "$failures failures"
((failures == 0))
