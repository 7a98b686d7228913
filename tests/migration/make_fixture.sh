#!/usr/bin/env bash
# Writes a coordinator state database with a given build's binaries: a tenant's
# tokens, tenant policy, sealed store credentials, a quota, two nodes, and jobs
# that succeeded, failed, were cancelled and still wait. The migration test
# opens what this wrote with the current build.
#   tests/migration/make_fixture.sh BIN_DIR OUT_DIR
# OUT_DIR gets state.db (checkpointed: no -wal beside it), secrets.key (which
# sealed the credentials), user.token (a stored user token's secret) and
# expected.txt (what the test must find).
set -euo pipefail
bin=$1 out=$2
work=$(mktemp -d /tmp/athanor-fixture.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$out"
ca=$work/ca
"$bin/athanor" admin ca init --dir "$ca" >/dev/null
for n in fx-a fx-b; do "$bin/athanor" admin ca agent --dir "$ca" --node "$n" >/dev/null; done
port=$((20000 + RANDOM % 10000))
"$bin/athanor-coordinator" --state "$work/state.db" --listen 127.0.0.1:$port --tls-dir "$ca" \
  --heartbeat-interval-ms 200 >"$work/coord.log" 2>&1 &
pids+=($!)
export ATHANOR_COORDINATOR=127.0.0.1:$port ATHANOR_CA=$ca/ca.crt
admin=$ca/admin.token
cli() { "$bin/athanor" --token-file "$admin" "$@"; }
for _ in $(seq 100); do cli nodes >/dev/null 2>&1 && break; sleep 0.1; done
cli quota set fixture-tenant 4 >/dev/null
user_token=$(cli admin token create --tenant fixture-tenant --description "fixture user" 2>"$work/user.id")
printf '%s' "$user_token" >"$work/user.token"; chmod 600 "$work/user.token"
cli admin token create --tenant fixture-tenant --role admin --ttl 90d --description "fixture admin" 2>"$work/admin.id" >/dev/null
token_id() { sed -n 's/^token \([0-9a-f]*\) .*/\1/p' "$1"; }
cli admin tenant set --tenant fixture-tenant --max-priority 5 >/dev/null
printf 'access_key=AKFIXTURE\nsecret_key=fixture-secret-key\n' >"$work/creds"; chmod 600 "$work/creds"
cli admin credentials set --tenant fixture-tenant --file "$work/creds" >/dev/null
for n in fx-a fx-b; do
  "$bin/athanor-agent" --coordinator 127.0.0.1:$port --name $n --gpus 2 --work-dir "$work/$n" \
    --tls-dir "$ca" --no-sandbox --no-telemetry --no-checkpoint-service >"$work/$n.log" 2>&1 &
  pids+=($!)
done
user() { "$bin/athanor" --token-file "$work/user.token" "$@"; }
for _ in $(seq 100); do [ "$(user nodes | grep -c UP || true)" = 2 ] && break; sleep 0.1; done
ok=$(user submit --nodes 2 --gpus-per-node 1 --name fixture-ok -- /bin/true)
user wait "$ok" --timeout 60 >/dev/null
bad=$(user submit --nodes 1 --gpus-per-node 1 --name fixture-fail -- /bin/false)
user wait "$bad" --timeout 60 >/dev/null || true
long=$(user submit --nodes 2 --gpus-per-node 1 --name fixture-running -- sleep 600)
for _ in $(seq 100); do user job "$long" | grep -q RUNNING && break; sleep 0.1; done
pend=$(user submit --nodes 2 --gpus-per-node 2 --name fixture-pending --priority 3 -- /bin/true)
gone=$(user submit --nodes 2 --gpus-per-node 2 --name fixture-cancelled -- /bin/true)
user cancel "$gone" >/dev/null
# Stop the agents, then the coordinator (SIGTERM: it checkpoints its WAL).
kill "${pids[1]}" "${pids[2]}"; wait "${pids[1]}" "${pids[2]}" 2>/dev/null || true
kill "${pids[0]}"; wait "${pids[0]}" 2>/dev/null || true
pids=()
sqlite3 "$work/state.db" 'PRAGMA wal_checkpoint(TRUNCATE);' >/dev/null
cp "$work/state.db" "$out/state.db"
# The key that sealed the credentials; the test makes a CA of its own.
cp -p "$ca/secrets.key" "$out/secrets.key"
# The user token's secret, so the test can show a stored token still signs in.
cp -p "$work/user.token" "$out/user.token"
{
  echo "job $ok fixture-ok SUCCEEDED"
  echo "job $bad fixture-fail FAILED"
  echo "job $long fixture-running RUNNING"
  echo "job $pend fixture-pending PENDING"
  echo "job $gone fixture-cancelled CANCELLED"
  echo "node fx-a"
  echo "node fx-b"
  echo "token $(token_id "$work/user.id") fixture-tenant user"
  echo "token $(token_id "$work/admin.id") fixture-tenant admin"
  echo "quota fixture-tenant 4"
  echo "tenant fixture-tenant max_priority 5"
  echo "credentials fixture-tenant AKFIXTURE"
} >"$out/expected.txt"
cat "$out/expected.txt"
