// Sandbox: how the agent confines every rank it starts (docs/security.md).
//
// Each job attempt on this node gets a box: a PID namespace (whose pid 1 is
// a holder process, so that ranks of one job see and signal each other, as
// their shared-memory transport needs, and nothing else), a cgroup with the
// job's memory, pids and CPU limits and a devices allow-list, a private
// /dev/shm shared by its ranks, and the job's work folder
// WORK_DIR/jobs/<job>/work owned by the tenant's uid. Each rank then runs
// through athanor-sandbox-exec: in the box's PID namespace and cgroup, in its
// own mount namespace (a read-only view of "/", a private /tmp, /dev with only
// the standard nodes plus its GPUs' and the GPU control nodes, the agent's
// work dir and other hidden paths masked, its work folder, its file://
// checkpoint folder and the operator's shared folders writable), as the
// tenant's uid with no capabilities and no_new_privs, with an environment
// built from an allow-list (the RankSpec env, PATH, HOME, TMPDIR, the
// operator's --sandbox-env names, and the attempt's rendezvous secret).
// The helper runs as root: it starts with PATH alone, and reads the rank's
// environment from a root-only file (WORK_DIR/sandbox-env/<rank>.env) that it
// applies only in the rank's execve, as the tenant's uid.
//
// Before the first rank, Create() ends and removes what killed agents left
// on this host (AgentRegistry in orphans.h, JobCgroup::RemoveStale), so no
// box depends on a leftover; each job cgroup's device rules are written
// afresh and checked.
//
// A box of an attempt with a job network (RankTarget::network) also has its
// own network namespace (the holder's), which every rank of the box joins,
// joined to the host by JobNetworkHost (job_network.h).
//
// The box goes when its last rank has ended: the holder is SIGKILLed (which
// ends anything the ranks left in the namespace), the cgroup and /dev/shm
// folder removed, its network's routes and rules too.
//
// Thread model: not thread-safe; RankSupervisor calls it under its own lock.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/subprocess.h"
#include "worker/agent/cgroups.h"
#include "worker/agent/job_network.h"
#include "worker/agent/orphans.h"
#include "worker/agent/rank_supervisor.h"

namespace athanor::agent {

struct SandboxOptions {
  std::string exec_path;   // athanor-sandbox-exec
  std::string work_dir;    // the agent's; masked inside every sandbox
  std::string node_name;
  uint32_t uid_first = 200000;  // tenant uids: uid_first + hash(tenant) % uid_count
  uint32_t uid_count = 65536;
  std::map<std::string, uint32_t> tenant_uids;  // explicit mapping, wins over the range
  std::vector<std::string> hide;        // more paths masked (e.g. the coordinator's state)
  std::vector<std::string> shared_dirs; // writable in every sandbox (shared scratch)
  std::vector<std::string> pass_env;    // agent variables passed to ranks
  std::string gpu_device_dir = "/dev";  // GPU i is <dir>/nvidia<i>; control nodes beside
  int64_t pids_max = 4096;              // per job attempt on this node
  int64_t node_memory_mb = 0;
  int32_t node_cpus = 0;
  int32_t node_gpus = 0;
  std::string rendezvous_key;           // cluster key; empty: no per-attempt secret
  std::string registry_dir = "/run/athanor/agents";  // AgentRegistry (orphans.h)
  std::vector<NetAllow> net_allow;      // what job networks reach besides their peers (--net-allow)
};

// What the job asked for on this node (0: its share of the node by GPUs).
struct JobShare {
  std::string tenant;
  int64_t memory_mb = 0;
  double cpus = 0;
  std::vector<int32_t> node_gpu_ids;  // every GPU of the job on this node
};

class Sandbox {
 public:
  // FailedPrecondition saying why when this machine cannot sandbox (not root,
  // no namespaces, no memory+pids cgroups, helper missing).
  static absl::StatusOr<std::unique_ptr<Sandbox>> Create(SandboxOptions options);
  ~Sandbox();  // ends every box and removes this agent's cgroup and /dev/shm folders

  // Rewrites `options` (argv, env, output already set) so the rank starts in
  // its box; makes the box at the attempt's first rank. `own_dir` is the
  // interactive rank's own work dir, or empty. `image_rootfs` (ImageCache's
  // tree for RankTarget::image_digest; empty: the host's "/") becomes the
  // rank's root: read-only, nosuid, nodev, with the same /dev nodes, /proc,
  // /tmp, /dev/shm, work, checkpoint, telemetry and shared folders mounted on
  // top at the same paths, and nothing else of the host's file system but the
  // GPU driver libraries and, for a host program the image lacks, the host's
  // loader and library folders, read-only (sandbox_image.h). The uid,
  // capability, no_new_privs, cgroup and environment rules are the same: an
  // image cannot hold device nodes or setuid files (storage::UnpackTree), and
  // its files are root's.
  absl::Status Wrap(const RankTarget& target, const JobShare& share, const std::string& own_dir,
                    SubprocessOptions* options, const std::string& image_rootfs = "");
  // A rank started by Wrap has ended (or failed to start): returns "out of
  // memory" when the kernel's OOM killer acted in its box and `signal` is
  // SIGKILL, else "". Ends the box after its last rank.
  std::string Ended(const RankKey& key, int signal);
  std::string Describe() const;
  // How a shell enters `key`'s running rank (shell_session.h): the options
  // that start `command` through athanor-sandbox-exec enter in the box of
  // the rank process `rank_pid` (host pid), its namespaces and cgroups, as
  // `uid` (the rank's), in `cwd`, with `env` (through a root-only file named
  // by `shell_id`, as Wrap does), on the terminal `tty` or pipes.
  absl::Status WrapShell(const RankKey& key, pid_t rank_pid, uint32_t uid, const std::string& cwd,
                         const std::map<std::string, std::string>& env, bool tty, int64_t shell_id,
                         SubprocessOptions* options);
  // The host path of the /dev/shm folder of `key`'s box; empty when it has none.
  std::string ShmDir(const RankKey& key) const;
  // The per-attempt secret ("" without a cluster key).
  static std::string RendezvousSecret(const std::string& key, const std::string& job_id, int32_t attempt);
  uint32_t TenantUid(const std::string& tenant) const;
  // The folder whose mount hides `command` from a rank given `mounts` (Wrap's
  // "KIND:SRC:DST" list), or "" when the rank sees it: the mount with the
  // longest DST containing the command decides, and only the empty kinds
  // ("ro::", "tmpfs::") hide. Relative commands are found in the rank's cwd
  // or PATH, which ranks see.
  static std::string HiddenBy(const std::vector<std::string>& mounts, const std::string& command);

 private:
  struct Box {
    std::unique_ptr<JobCgroup> cgroup;
    pid_t holder = 0;
    int64_t holder_start = -1;
    std::string shm_dir;
    std::set<int32_t> ranks;
    bool networked = false;  // its own network namespace, joined to the host (job_network.h)
  };
  Sandbox(SandboxOptions options, CgroupLayout layout, std::string root_dir, std::string tag,
          std::unique_ptr<AgentRegistry> registry);
  absl::StatusOr<Box*> BoxFor(const RankTarget& target, const JobShare& share, uint32_t uid);
  void EndBox(const std::string& name, Box& box);
  std::vector<std::string> DeviceAllowList(const std::vector<int32_t>& gpus) const;
  std::string EnvFile(const RankKey& key) const;  // the rank's environment for the helper

  const SandboxOptions options_;
  const CgroupLayout layout_;
  const std::string root_dir_;  // empty mount point for a rank's new root
  const std::string env_dir_;   // root-only: ranks' environments on their way to the helper
  const std::string tag_;       // names this agent's cgroups and /dev/shm folder
  const std::unique_ptr<AgentRegistry> registry_;  // holds this agent's claim on its tag
  std::unique_ptr<JobNetworkHost> network_;  // job networks' host side (set once, in Create)
  std::map<std::string, Box> boxes_;  // by "<job>.<attempt>"
};

}  // namespace athanor::agent
