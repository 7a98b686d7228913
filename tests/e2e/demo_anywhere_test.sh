#!/usr/bin/env bash
# scripts/demo from a fresh clone in a folder a new user would pick, with the
# install and build steps pointed at an existing build (its six binaries are
# copied into the clone's build/bin, where a build there would put them):
#   demo_anywhere_test.sh BIN_DIR SOURCE_DIR tmp-space
#       a clone under /tmp whose path holds a space, as the calling user (as
#       root: sandboxed ranks run the clone's athanor-train, shown to them
#       because their uid may read it)
#   demo_anywhere_test.sh BIN_DIR SOURCE_DIR root-home
#       a clone in root's home folder, as root (needs root: skipped, exit 77,
#       otherwise)
#   demo_anywhere_test.sh BIN_DIR SOURCE_DIR home-user
#       a clone in the home folder of an ordinary user made for the test under
#       /home, run as that user (needs root to make the user: skipped, exit 77,
#       otherwise)
# Passes when the demo exits 0 having found the interrupted job's weights
# identical to the reference's. A watchdog ends a demo that hangs.
set -euo pipefail
bin_dir="$(cd "$1" && pwd)"
source_dir="$2"
mode="$3"
binaries=(athanor athanor-coordinator athanor-agent athanor-sandbox-exec athanor-checkpoint-service athanor-train)
watchdog_s=480

user=""
case "$mode" in
  tmp-space)
    top="$(mktemp -d /tmp/athanor-anywhere.XXXXXX)"
    chmod 0755 "$top"  # as `git clone REPO /tmp/NAME` leaves it
    clone="$top/my clone"
    ;;
  root-home)
    # root's own home (mode 0700 on Debian): tenants' uids cannot read the
    # clone's build there, so the demo installs athanor-train where they can.
    if [ "$(id -u)" != 0 ]; then echo "SKIP: running as root in /root needs root"; exit 77; fi
    top="$(mktemp -d /root/athanor-anywhere.XXXXXX)"
    clone="$top/athanor"
    ;;
  home-user)
    if [ "$(id -u)" != 0 ]; then echo "SKIP: making a user for the test needs root"; exit 77; fi
    user="athanor-demo-$$"
    useradd --create-home --home-dir "/home/$user" --shell /bin/bash "$user"
    top="/home/$user"
    clone="$top/athanor"
    ;;
  *) echo "usage: $0 BIN_DIR SOURCE_DIR tmp-space|root-home|home-user" >&2; exit 2 ;;
esac
log="$(mktemp /tmp/athanor-anywhere-log.XXXXXX)"
cleanup() {
  if [ -n "$user" ]; then
    pkill -KILL -u "$user" 2>/dev/null || true
    userdel --remove "$user" 2>/dev/null || true
  fi
  # The demo keeps its work dir for reading; a passing run's is not needed.
  if [ "$passed" = 1 ]; then
    rm -rf "$(sed -n 's/^demo: stopped; logs and state kept in //p' "$log")"
  fi
  rm -rf "$top" "$log"
}
passed=0
trap cleanup EXIT

git clone --quiet --no-hardlinks "$source_dir" "$clone"
mkdir -p "$clone/build/bin"
for b in "${binaries[@]}"; do cp "$bin_dir/$b" "$clone/build/bin/$b"; done
run=(env SKIP_BUILD=1 "$clone/scripts/demo")
if [ -n "$user" ]; then
  chown -R "$user:$user" "$clone"
  run=(runuser -u "$user" -- env HOME="/home/$user" SKIP_BUILD=1 "$clone/scripts/demo")
fi
echo "running the demo from '$clone'${user:+ as $user}"
rc=0
(cd "$top" && timeout --kill-after=10 "$watchdog_s" "${run[@]}") >"$log" 2>&1 || rc=$?
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
  tail -n 60 "$log"
  echo "FAIL: the demo did not end within $watchdog_s s"
  exit 1
fi
if [ "$rc" != 0 ] || ! grep -q "identical (" "$log"; then
  tail -n 60 "$log"
  echo "FAIL: the demo exited $rc without finding identical weights"
  exit 1
fi
# Where the ranks got athanor-train: from the clone itself, shown to them by
# the agent, when their uid can read it there (a clone under /tmp); a copy the
# demo installed when it cannot (root's home).
if [ "$(id -u)" = 0 ]; then
  copied=0
  grep -q "installed a copy" "$log" && copied=1
  want=0
  [ "$mode" = root-home ] && want=1
  if [ "$copied" != "$want" ]; then
    tail -n 60 "$log"
    if [ "$want" = 1 ]; then echo "FAIL: the demo did not install a copy of athanor-train";
    else echo "FAIL: the demo installed a copy of athanor-train, though the tenant may read the clone's"; fi
    exit 1
  fi
fi
grep -E "identical \(|installed a copy|took" "$log" || true
passed=1
echo "PASS: the demo from '$clone' ended with identical weights"
