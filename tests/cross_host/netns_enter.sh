# shellcheck shell=bash
# Sourced by the namespace host helpers (netns_hosts.sh here, and
# tests/e2e/e2e_hosts.sh): sets $enter, the sh script a host's command runs
# under: `sh -c "$enter" HOSTNAME CMD [ARGS...]`, inside `ip netns exec NS
# unshare --uts`.
#
# `ip netns exec` mounts a fresh /sys, without the cgroup hierarchies that an
# agent's rank sandboxes need: $enter mounts them again as this host has them
# (v1 controllers by name, the v2 hierarchy, listed in $NETNS_CGROUPS), then
# names the host and execs CMD.
export NETNS_CGROUPS
NETNS_CGROUPS=$(awk '$3 == "cgroup2" { print "cgroup2", $2, "-" }
  $3 == "cgroup" && $4 !~ /name=/ { n = split($4, o, ","); c = "";
    for (i = 1; i <= n; i++) if (o[i] !~ /^(rw|ro|relatime|nosuid|nodev|noexec)$/) c = c (c ? "," : "") o[i];
    print "cgroup", $2, c }' /proc/self/mounts)
# shellcheck disable=SC2016,SC2034  # expanded by the host's sh; used by the sourcing file
enter='if [ -n "$NETNS_CGROUPS" ] && ! [ -e /sys/fs/cgroup/cgroup.procs ] && mount -t tmpfs -o mode=755 cgroups /sys/fs/cgroup; then
  echo "$NETNS_CGROUPS" | while read -r type path opts; do
    mkdir -p "$path" && if [ "$type" = cgroup2 ]; then mount -t cgroup2 cgroup2 "$path"; else mount -t cgroup -o "$opts" cgroup "$path"; fi
  done
fi
hostname "$0" && exec "$@"'
