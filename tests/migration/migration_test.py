#!/usr/bin/env python3
"""Opens a state database that an earlier release wrote, with this build.

    migration_test.py BIN_DIR FIXTURE_DIR [FIXTURE_DIR ...]

Each FIXTURE_DIR was written by tests/migration/make_fixture.sh with that
release's binaries: state.db, secrets.key (which sealed the credentials),
user.token (a stored user token's secret) and expected.txt. The test copies the database, makes a CA of its own with this
build, starts this build's coordinator on the copy with the fixture's secrets
key, and asks it, as the bootstrap admin, for every job, node, token, quota,
tenant policy and tenant with credentials that expected.txt names. Then it
starts an agent and runs a job of the fixture's tenant that prints the access
key the coordinator unsealed for it.

Every wait is bounded: the coordinator's start by its "serving on" line, each
CLI call by a timeout, and the whole test by ctest's TIMEOUT.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

CALL_TIMEOUT_S = 30
JOB_STATES = {
    "SUCCEEDED": "JOB_SUCCEEDED",
    "FAILED": "JOB_FAILED",
    "RUNNING": "JOB_RUNNING",
    "PENDING": "JOB_PENDING",
    "CANCELLED": "JOB_CANCELLED",
}

failures = []


def check(what, got, want):
    if got != want:
        failures.append(f"{what}: got {got!r}, want {want!r}")
        print(f"FAIL {what}: got {got!r}, want {want!r}")
    else:
        print(f"ok   {what}: {got!r}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_line(proc, needle, timeout_s, log):
    """Reads proc's merged output until a line holds needle; returns the lines."""
    deadline = time.monotonic() + timeout_s
    lines = []
    os.set_blocking(proc.stdout.fileno(), True)
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError(needle)))
    signal.setitimer(signal.ITIMER_REAL, max(0.1, deadline - time.monotonic()))
    try:
        for raw in proc.stdout:
            line = raw.decode(errors="replace")
            log.write(line)
            lines.append(line)
            if needle in line:
                return lines
        raise RuntimeError(f"process exited before printing {needle!r}:\n{''.join(lines)}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


class Cluster:
    def __init__(self, bin_dir, fixture, work):
        self.bin = bin_dir
        self.work = work
        self.ca = os.path.join(work, "ca")
        self.procs = []
        self.port = free_port()
        shutil.copy(os.path.join(fixture, "state.db"), os.path.join(work, "state.db"))
        self.run_ok([self.athanor(), "admin", "ca", "init", "--dir", self.ca])
        key = os.path.join(self.ca, "secrets.key")
        shutil.copy(os.path.join(fixture, "secrets.key"), key)
        os.chmod(key, 0o600)
        self.env = dict(os.environ, ATHANOR_COORDINATOR=f"127.0.0.1:{self.port}",
                        ATHANOR_CA=os.path.join(self.ca, "ca.crt"))
        self.env.pop("ATHANOR_TOKEN", None)
        self.admin = os.path.join(self.ca, "admin.token")

    def athanor(self):
        return os.path.join(self.bin, "athanor")

    def run_ok(self, argv, env=None):
        r = subprocess.run(argv, capture_output=True, text=True, timeout=CALL_TIMEOUT_S, env=env)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} exited {r.returncode}: {r.stderr}")
        return r.stdout

    def cli(self, *args, token=None):
        return self.run_ok([self.athanor(), "--token-file", token or self.admin, *args], env=self.env)

    def cli_json(self, *args, token=None):
        return json.loads(self.cli(*args, "--json", token=token))

    def start(self, argv, needle, name):
        log = open(os.path.join(self.work, f"{name}.log"), "w")
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        try:
            wait_for_line(proc, needle, CALL_TIMEOUT_S, log)
        except Exception:
            log.flush()
            print(open(log.name).read())
            raise
        # Keep draining its output so it never blocks on a full pipe.
        import threading
        threading.Thread(target=lambda: [log.write(l.decode(errors="replace")) for l in proc.stdout],
                         daemon=True).start()
        return proc

    def start_coordinator(self):
        self.start([os.path.join(self.bin, "athanor-coordinator"), "--state", os.path.join(self.work, "state.db"),
                    "--listen", f"127.0.0.1:{self.port}", "--tls-dir", self.ca,
                    "--heartbeat-timeout-s", "3600"], "serving on", "coordinator")

    def start_agent(self, node):
        self.run_ok([self.athanor(), "admin", "ca", "agent", "--dir", self.ca, "--node", node])
        self.start([os.path.join(self.bin, "athanor-agent"), "--coordinator", f"127.0.0.1:{self.port}",
                    "--name", node, "--gpus", "1", "--work-dir", os.path.join(self.work, node),
                    "--tls-dir", self.ca, "--no-sandbox", "--no-telemetry", "--no-checkpoint-service"],
                   "registered", node)

    def stop(self):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=CALL_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                p.kill()


def expected(fixture):
    want = {"job": {}, "node": set(), "token": {}, "quota": {}, "tenant": {}, "credentials": {}}
    for line in open(os.path.join(fixture, "expected.txt")):
        f = line.split()
        if f[0] == "job":
            want["job"][f[1]] = (f[2], JOB_STATES[f[3]])
        elif f[0] == "node":
            want["node"].add(f[1])
        elif f[0] == "token":
            want["token"][f[1]] = (f[2], f[3])
        elif f[0] == "quota":
            want["quota"][f[1]] = int(f[2])
        elif f[0] == "tenant":
            want["tenant"][f[1]] = int(f[3])
        elif f[0] == "credentials":
            want["credentials"][f[1]] = f[2]
    return want


def check_fixture(bin_dir, fixture):
    name = os.path.basename(os.path.normpath(fixture))
    want = expected(fixture)
    work = tempfile.mkdtemp(prefix="athanor-migration.")
    cluster = Cluster(bin_dir, fixture, work)
    try:
        fixture_token = os.path.join(work, "fixture-user.token")
        shutil.copy(os.path.join(fixture, "user.token"), fixture_token)
        os.chmod(fixture_token, 0o600)
        cluster.start_coordinator()
        jobs = cluster.cli_json("jobs", "--all")["jobs"]
        check(f"{name} jobs", {j["id"]: (j["spec"]["name"], j["state"]) for j in jobs}, want["job"])
        nodes = cluster.cli_json("nodes")["nodes"]
        check(f"{name} nodes", {n["name"] for n in nodes}, want["node"])
        tokens = cluster.cli_json("admin", "token", "list")["tokens"]
        check(f"{name} tokens", {t["id"]: (t["tenant"], t["role"]) for t in tokens if t["id"] in want["token"]},
              want["token"])
        quotas = cluster.cli_json("quota")["quotas"]
        check(f"{name} quotas", {q["tenant"]: q["gpus"] for q in quotas}, want["quota"])
        policies = cluster.cli_json("admin", "tenant", "list")["policies"]
        check(f"{name} tenant policies", {p["tenant"]: p["max_priority"] for p in policies}, want["tenant"])
        with_creds = set(cluster.cli("admin", "credentials", "list").split())
        check(f"{name} tenants with credentials", with_creds, set(want["credentials"]))

        # A token stored by the earlier release still signs its user in.
        mine = cluster.cli_json("jobs", "--all", token=os.path.join(work, "fixture-user.token"))["jobs"]
        check(f"{name} jobs seen with the stored user token", sorted(j["id"] for j in mine), sorted(want["job"]))

        # The sealed credentials open with the fixture's key: a job of the
        # tenant gets its access key in its environment.
        for tenant, access_key in want["credentials"].items():
            token_file = os.path.join(work, "user.token")
            token = cluster.cli("admin", "token", "create", "--tenant", tenant).strip()
            with open(os.open(token_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
                f.write(token)
            cluster.start_agent("migration-node")
            job = cluster.cli("submit", "--nodes", "1", "--gpus-per-node", "1", "--name", "print-key", "--",
                              "sh", "-c", 'echo "key=$AWS_ACCESS_KEY_ID"', token=token_file).strip()
            cluster.cli("wait", job, "--timeout", str(CALL_TIMEOUT_S), token=token_file)
            out = cluster.cli("logs", job, token=token_file)
            check(f"{name} {tenant}'s access key in its rank's env",
                  [l for l in out.splitlines() if "key=" in l], [f"[rank 0] key={access_key}"])
    finally:
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    bin_dir = sys.argv[1]
    for fixture in sys.argv[2:]:
        check_fixture(bin_dir, fixture)
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("every record of every fixture was found")
    return 0


if __name__ == "__main__":
    sys.exit(main())
