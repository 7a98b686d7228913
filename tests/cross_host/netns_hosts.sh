# Sourced by the cross-host tests: two "hosts", network namespaces $ns_a
# (10.77.0.1) and $ns_b (10.77.0.2) joined by a veth pair; on_host runs a
# command in one with its own UTS namespace (so its own hostname). Exits 77
# (skipped) where namespaces cannot be made, or 1 (failed) when
# ATHANOR_REQUIRE_NETNS is set (scripts/test sets it as root, where they must
# work); removes them on exit.

skip() {
  if [ -n "${ATHANOR_REQUIRE_NETNS:-}" ]; then
    echo "FAILED: ATHANOR_REQUIRE_NETNS is set but: $*"
    exit 1
  fi
  echo "SKIPPED: $*"
  exit 77
}
[ "$(id -u)" = 0 ] || skip "needs root for network namespaces"
command -v ip > /dev/null || skip "needs iproute2 (ip)"
command -v unshare > /dev/null || skip "needs unshare (util-linux)"

tag="ath$$"
ns_a="${tag}a" ns_b="${tag}b"
addr_a=10.77.0.1 addr_b=10.77.0.2
host_cleanups=()
netns_cleanup() {
  local c
  for c in "${host_cleanups[@]}"; do eval "$c"; done
  ip netns del "$ns_a" 2> /dev/null
  ip netns del "$ns_b" 2> /dev/null
}
trap netns_cleanup EXIT
ip netns add "$ns_a" 2> /dev/null || skip "cannot create network namespaces here"
ip netns add "$ns_b" || skip "could not set up the namespaces"
ip link add "${tag}va" type veth peer name "${tag}vb" || skip "cannot create veth pairs here"
ip link set "${tag}va" netns "$ns_a" && ip link set "${tag}vb" netns "$ns_b" || skip "could not set up the namespaces"
ip -n "$ns_a" addr add "$addr_a/24" dev "${tag}va" || skip "could not set up the namespaces"
ip -n "$ns_b" addr add "$addr_b/24" dev "${tag}vb" || skip "could not set up the namespaces"
for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up || skip "could not set up the namespaces"; done
ip -n "$ns_a" link set "${tag}va" up && ip -n "$ns_b" link set "${tag}vb" up || skip "could not set up the namespaces"

. "$(dirname "${BASH_SOURCE[0]}")/netns_enter.sh"  # $enter: cgroups remounted, host named

# on_host NS HOSTNAME CMD [ARGS...]: CMD in that network namespace, named HOSTNAME.
on_host() {
  local ns=$1 host=$2
  shift 2
  ip netns exec "$ns" unshare --uts sh -c "$enter" "$host" "$@"
}

# spawn_on_host NS HOSTNAME OUTFILE CMD [ARGS...]: the same in the background,
# output to OUTFILE; $! is CMD's own pid (every step execs), and CMD is killed
# on exit.
spawn_on_host() {
  local ns=$1 host=$2 outfile=$3
  shift 3
  (exec ip netns exec "$ns" unshare --uts sh -c "$enter" "$host" "$@" \
     > "$outfile" 2>&1) &
  host_cleanups+=("kill $! 2> /dev/null")
}

on_host "$ns_a" probe true 2> /dev/null || skip "cannot enter network or UTS namespaces here"
