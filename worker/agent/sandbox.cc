#include "worker/agent/sandbox.h"

#include <openssl/evp.h>
#include <fcntl.h>
#include <openssl/hmac.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status.h"
#include "worker/agent/command_access.h"
#include "worker/agent/orphans.h"
#include "worker/agent/sandbox_image.h"
#include "worker/agent/tenant_paths.h"
#include "worker/agent/volume_sync.h"

extern char** environ;

namespace athanor::agent {
namespace {

namespace fs = std::filesystem;

constexpr char kDefaultPath[] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
// The helper's own environment: it runs as root, so nothing of the job's.
constexpr char kHelperPath[] = "/usr/sbin:/usr/bin:/sbin:/bin";
// Bounds on a rank's environment (athanor-sandbox-exec checks them again).
constexpr size_t kMaxEnvVars = 4096;
constexpr size_t kMaxEnvBytes = size_t{1} << 20;
// Nodes every program may use, and the GPU control nodes CUDA opens.
constexpr const char* kStandardDevices[] = {"null", "zero", "full", "random", "urandom", "tty"};
constexpr const char* kGpuControlDevices[] = {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools",
                                              "nvidia-modeset"};

uint32_t Fnv1a(const std::string& s) {
  uint32_t h = 2166136261u;
  for (unsigned char c : s) h = (h ^ c) * 16777619u;
  return h;
}

// "c MAJOR:MINOR rwm" for a character device node; "" when it is not one.
std::string DeviceRule(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISCHR(st.st_mode)) return "";
  return absl::StrCat("c ", major(st.st_rdev), ":", minor(st.st_rdev), " rwm");
}

absl::Status Own(const std::string& path, uint32_t uid) {
  if (lchown(path.c_str(), uid, uid) != 0) return ErrnoStatus("chown " + path);
  return absl::OkStatus();
}

absl::Status MakeOwnedDir(const std::string& path, uint32_t uid, mode_t mode) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", path, ": ", ec.message()));
  RETURN_IF_ERROR(Own(path, uid));
  if (chmod(path.c_str(), mode) != 0) return ErrnoStatus("chmod " + path);
  return absl::OkStatus();
}

// Waits (bounded) for a process that is not our child to end.
void AwaitExit(pid_t pid) {
  int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return;  // already gone
  pollfd p{fd, POLLIN, 0};
  int rc;
  do {
    rc = poll(&p, 1, 5000);
  } while (rc < 0 && errno == EINTR);
  close(fd);
}

bool UsablePath(const std::string& p) {
  return !p.empty() && p[0] == '/' && p.find(':') == std::string::npos;
}

// A folder of root's that nobody else may enter, made afresh.
absl::Status MakeRootOnlyDir(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);  // a previous incarnation's files
  if (mkdir(path.c_str(), 0700) != 0) return ErrnoStatus("mkdir " + path);
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return ErrnoStatus("stat " + path);
  if (!S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & 077) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(path, " is not a folder of root's, mode 0700"));
  }
  return absl::OkStatus();
}

// Writes `env` for athanor-sandbox-exec --env-file: NAME=VALUE entries each
// ended by a NUL, in a new 0600 file of root's, bounded in count and bytes.
absl::Status WriteEnvFile(const std::string& path, const std::map<std::string, std::string>& env) {
  if (env.size() > kMaxEnvVars) {
    return absl::InvalidArgumentError(
        absl::StrCat("the rank's environment has ", env.size(), " variables; at most ", kMaxEnvVars));
  }
  std::string bytes;
  for (const auto& [name, value] : env) {
    if (name.empty() || name.find_first_of(std::string("=\0", 2)) != std::string::npos ||
        value.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("environment variable '", absl::CEscape(name.substr(0, 64)),
                                                     "': a name is not empty and holds no '=' or NUL, a "
                                                     "value holds no NUL"));
    }
    absl::StrAppend(&bytes, name, "=", value);
    bytes.push_back('\0');
    if (bytes.size() > kMaxEnvBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("the rank's environment is over ", kMaxEnvBytes, " bytes"));
    }
  }
  std::string tmp = path + ".tmp";
  unlink(tmp.c_str());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus("create " + tmp);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      absl::Status s = ErrnoStatus("write " + tmp);
      close(fd);
      unlink(tmp.c_str());
      return s;
    }
    done += static_cast<size_t>(n);
  }
  close(fd);
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    absl::Status s = ErrnoStatus("rename " + tmp);
    unlink(tmp.c_str());
    return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Sandbox>> Sandbox::Create(SandboxOptions options) {
  if (geteuid() != 0) {
    return absl::FailedPreconditionError(
        "the agent does not run as root, so it cannot run ranks as tenant uids in their own "
        "namespaces and cgroups");
  }
  for (const char* ns : {"/proc/self/ns/pid", "/proc/self/ns/mnt"}) {
    if (access(ns, F_OK) != 0) {
      return absl::FailedPreconditionError(absl::StrCat("this kernel has no ", ns, " (namespaces)"));
    }
  }
  if (syscall(SYS_mount_setattr, -1, "", 0, nullptr, 0) != 0 && errno == ENOSYS) {
    return absl::FailedPreconditionError("this kernel lacks mount_setattr (Linux 5.12 or later)");
  }
  if (access(options.exec_path.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot execute the sandbox helper ", options.exec_path, ": ", strerror(errno)));
  }
  for (const std::string* p : {&options.work_dir, &options.gpu_device_dir}) {
    if (!UsablePath(*p)) {
      return absl::InvalidArgumentError(absl::StrCat("'", *p, "' is not an absolute path without ':'"));
    }
  }
  if (options.uid_first == 0 || options.uid_count == 0 ||
      uint64_t{options.uid_first} + options.uid_count > 0xfffffffeULL) {
    return absl::InvalidArgumentError("tenant uid range: must be non-empty, above 0 and below 2^32-1");
  }
  std::string name;
  for (char c : options.node_name) name += absl::ascii_isalnum(static_cast<unsigned char>(c)) ? c : '_';
  std::string tag = absl::StrCat(name.substr(0, 32), "-", absl::Hex(Fnv1a(options.work_dir), absl::kZeroPad8));
  // A clean slate: what killed agents left (this one's previous incarnation
  // included, whatever cgroup it ran in) is ended and removed before a rank runs.
  ASSIGN_OR_RETURN(std::unique_ptr<AgentRegistry> registry, AgentRegistry::Claim(options.registry_dir, tag));
  registry->Reap();
  ASSIGN_OR_RETURN(CgroupLayout layout, CgroupLayout::Detect(tag));
  JobCgroup::RemoveStale(layout);
  RETURN_IF_ERROR(registry->Record(layout.bases()));
  RETURN_IF_ERROR(MakeRootOnlyDir(options.work_dir + "/sandbox-env"));
  std::string root_dir = options.work_dir + "/sandbox-root";
  std::error_code ec;
  fs::create_directories(root_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", root_dir, ": ", ec.message()));
  std::string shm = "/dev/shm/athanor-" + tag;
  fs::remove_all(shm, ec);  // a previous incarnation's boxes
  fs::create_directories(shm, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat("cannot create ", shm, ": ", ec.message()));
  // Job networks' leftovers of a killed predecessor go too (job_network.h).
  ASSIGN_OR_RETURN(std::unique_ptr<JobNetworkHost> network,
                   JobNetworkHost::Create(tag, options.work_dir + "/net", options.net_allow));
  std::unique_ptr<Sandbox> sandbox(
      new Sandbox(std::move(options), std::move(layout), root_dir, tag, std::move(registry)));
  sandbox->network_ = std::move(network);
  // Prove a namespace can be made before claiming to sandbox.
  RankTarget probe;
  probe.key = {"sandbox-probe", 0, 0};
  absl::StatusOr<Box*> box = sandbox->BoxFor(probe, JobShare{}, sandbox->TenantUid("default"));
  if (!box.ok()) return absl::FailedPreconditionError(absl::StrCat("cannot make a sandbox: ", box.status().message()));
  sandbox->EndBox("sandbox-probe.0", **box);
  sandbox->boxes_.erase("sandbox-probe.0");
  return sandbox;
}

Sandbox::Sandbox(SandboxOptions options, CgroupLayout layout, std::string root_dir, std::string tag,
                 std::unique_ptr<AgentRegistry> registry)
    : options_(std::move(options)), layout_(std::move(layout)), root_dir_(std::move(root_dir)),
      env_dir_(options_.work_dir + "/sandbox-env"), tag_(std::move(tag)), registry_(std::move(registry)) {}

Sandbox::~Sandbox() {
  for (auto& [name, box] : boxes_) EndBox(name, box);
  // This agent's directories, when empty (a box of a rank that outlived us stays).
  for (const std::string& base : layout_.bases()) rmdir(base.c_str());
  rmdir(("/dev/shm/athanor-" + tag_).c_str());
}

std::string Sandbox::Describe() const {
  return absl::StrCat("ranks sandboxed (", layout_.Describe(), ", tenant uids ", options_.uid_first, "-",
                      options_.uid_first + options_.uid_count - 1,
                      options_.rendezvous_key.empty() ? ", no rendezvous key" : ", rendezvous secrets", ")");
}

uint32_t Sandbox::TenantUid(const std::string& tenant) const {
  auto it = options_.tenant_uids.find(tenant);
  if (it != options_.tenant_uids.end()) return it->second;
  return options_.uid_first + Fnv1a(tenant) % options_.uid_count;
}

std::string Sandbox::RendezvousSecret(const std::string& key, const std::string& job_id, int32_t attempt) {
  if (key.empty()) return "";
  std::string msg = absl::StrCat("athanor-rendezvous/", job_id, "/", attempt);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), mac, &len);
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) absl::StrAppend(&hex, absl::Hex(mac[i], absl::kZeroPad2));
  return hex;
}

std::vector<std::string> Sandbox::DeviceAllowList(const std::vector<int32_t>& gpus) const {
  std::vector<std::string> allow = {"c 136:* rwm", "c 5:2 rwm"};  // pseudo-terminals
  for (const char* d : kStandardDevices) {
    std::string rule = DeviceRule(absl::StrCat("/dev/", d));
    if (!rule.empty()) allow.push_back(rule);
  }
  for (const char* d : kGpuControlDevices) {
    std::string rule = DeviceRule(absl::StrCat(options_.gpu_device_dir, "/", d));
    if (!rule.empty()) allow.push_back(rule);
  }
  for (int32_t g : gpus) {
    std::string rule = DeviceRule(absl::StrCat(options_.gpu_device_dir, "/nvidia", g));
    if (!rule.empty()) allow.push_back(rule);
  }
  return allow;
}

absl::StatusOr<Sandbox::Box*> Sandbox::BoxFor(const RankTarget& target, const JobShare& share, uint32_t uid) {
  std::string name = absl::StrCat(target.key.job_id, ".", target.key.attempt);
  auto it = boxes_.find(name);
  if (it != boxes_.end()) return &it->second;
  CgroupLimits limits;
  double fraction = 1.0;
  int32_t job_gpus = static_cast<int32_t>(share.node_gpu_ids.size());
  if (options_.node_gpus > 0 && job_gpus > 0) fraction = std::min(1.0, double(job_gpus) / options_.node_gpus);
  int64_t memory_mb = share.memory_mb > 0 ? share.memory_mb : static_cast<int64_t>(options_.node_memory_mb * fraction);
  limits.memory_bytes = memory_mb * (int64_t{1} << 20);
  limits.cpus = share.cpus > 0 ? share.cpus : std::max(0.5, options_.node_cpus * fraction);
  limits.pids_max = options_.pids_max;
  limits.device_allow = DeviceAllowList(share.node_gpu_ids);
  Box box;
  ASSIGN_OR_RETURN(box.cgroup, JobCgroup::Create(layout_, name, limits));
  SubprocessOptions holder;
  holder.argv = {options_.exec_path, "holder"};
  if (target.network) holder.argv.push_back("--net");
  holder.inherit_env = false;
  holder.capture_stdout = true;
  absl::StatusOr<std::unique_ptr<Subprocess>> p = Subprocess::Start(holder);
  std::string out = p.ok() ? (*p)->ReadAllStdout() : "";
  if (p.ok()) (*p)->Wait();  // it exits at once, leaving pid 1 of the namespace
  int pid = 0;
  if (!p.ok() || !absl::SimpleAtoi(absl::StripAsciiWhitespace(out), &pid) || pid <= 1) {
    box.cgroup->Remove();
    return absl::InternalError(absl::StrCat("cannot make a PID namespace: ",
                                            p.ok() ? "athanor-sandbox-exec holder failed" : p.status().message()));
  }
  box.holder = pid;
  box.holder_start = ProcessStartTime(pid);
  box.shm_dir = absl::StrCat("/dev/shm/athanor-", tag_, "/", name);
  absl::Status s = MakeOwnedDir(box.shm_dir, uid, 0700);
  if (!s.ok()) {
    EndBox(name, box);
    return s;
  }
  RecordRank(options_.work_dir, {target.key.job_id, target.key.attempt, -1}, pid);
  if (target.network) {
    box.networked = true;
    s = network_->Attach(name, pid, *target.network);
    if (!s.ok()) {
      EndBox(name, box);
      return s;
    }
  }
  ATHANOR_LOG(DEBUG) << "sandbox for job " << target.key.job_id << " attempt " << target.key.attempt
                     << ": pid namespace of " << pid << ", memory " << memory_mb << " MiB, cpus "
                     << limits.cpus << ", pids " << limits.pids_max;
  return &boxes_.emplace(name, std::move(box)).first->second;
}

void Sandbox::EndBox(const std::string& name, Box& box) {
  if (box.holder > 1 && box.holder_start >= 0 && ProcessStartTime(box.holder) == box.holder_start) {
    kill(box.holder, SIGKILL);  // the kernel ends everything left in the namespace
    AwaitExit(box.holder);
  }
  size_t dot = name.rfind('.');
  int32_t attempt = 0;
  if (dot != std::string::npos && absl::SimpleAtoi(name.substr(dot + 1), &attempt)) {
    ForgetRank(options_.work_dir, {name.substr(0, dot), attempt, -1});
  }
  if (box.networked) network_->Detach(name);
  if (box.cgroup) box.cgroup->Remove();
  std::error_code ec;
  if (!box.shm_dir.empty()) fs::remove_all(box.shm_dir, ec);
}

std::string Sandbox::ShmDir(const RankKey& key) const {
  auto it = boxes_.find(absl::StrCat(key.job_id, ".", key.attempt));
  return it == boxes_.end() ? "" : it->second.shm_dir;
}

absl::Status Sandbox::Wrap(const RankTarget& target, const JobShare& share, const std::string& own_dir,
                           SubprocessOptions* options, const std::string& image_rootfs) {
  const RankKey& key = target.key;
  uint32_t uid = TenantUid(share.tenant.empty() ? "default" : share.tenant);
  std::string work = absl::StrCat(options_.work_dir, "/jobs/", key.job_id, "/work");
  std::vector<std::string> mounts = {"ro::" + options_.work_dir, "tmpfs::/tmp", "ro::/dev", "proc::/proc"};
  for (const char* hidden : {"/root", "/home", "/run"}) {
    if (fs::is_directory(hidden) && !fs::is_symlink(hidden)) mounts.push_back(absl::StrCat("ro::", hidden));
  }
  for (const std::string& h : options_.hide) mounts.push_back("ro::" + h);
  for (const char* d : kStandardDevices) mounts.push_back(absl::StrCat("dev:/dev/", d, ":/dev/", d));
  for (const char* l : {"fd:/proc/self/fd", "stdin:/proc/self/fd/0", "stdout:/proc/self/fd/1",
                        "stderr:/proc/self/fd/2"}) {
    std::string s = l;
    mounts.push_back(absl::StrCat("link:", s.substr(s.find(':') + 1), ":/dev/", s.substr(0, s.find(':'))));
  }
  for (const char* d : kGpuControlDevices) {
    std::string path = absl::StrCat(options_.gpu_device_dir, "/", d);
    if (!DeviceRule(path).empty()) mounts.push_back(absl::StrCat("dev:", path, ":/dev/", d));
  }
  for (int32_t g : target.gpu_ids) {
    std::string path = absl::StrCat(options_.gpu_device_dir, "/nvidia", g);
    if (!DeviceRule(path).empty()) mounts.push_back(absl::StrCat("dev:", path, ":/dev/nvidia", g));
  }
  for (const std::string& d : options_.shared_dirs) mounts.push_back(absl::StrCat("bind:", d, ":", d));
  if (target.network) {
    // /sys of the box's network namespace, so that what lists interfaces
    // there (UCX's TCP transport reads /sys/class/net) finds eth0, not the
    // host's; the cgroup tree as before.
    mounts.push_back("sysfs::/sys");
    if (fs::is_directory("/sys/fs/cgroup")) mounts.push_back("robind:/sys/fs/cgroup:/sys/fs/cgroup");
  }
  std::string cwd = own_dir.empty() ? work : own_dir;
  RETURN_IF_ERROR(MakeOwnedDir(work, uid, 0750));
  mounts.push_back(absl::StrCat("bind:", work, ":", work));
  if (!own_dir.empty()) {
    RETURN_IF_ERROR(MakeOwnedDir(own_dir, uid, 0750));
    mounts.push_back(absl::StrCat("bind:", own_dir, ":", own_dir));
  }
  auto telemetry = options->env.find("ATHANOR_TELEMETRY_SOCKET");
  if (telemetry != options->env.end()) {
    // The attempt's telemetry folder (telemetry_hub.h): the tenant's, 0700.
    std::string dir = absl::StrCat(options_.work_dir, "/jobs/", key.job_id, "/telemetry");
    if (fs::path(telemetry->second).parent_path() != dir) {
      return absl::InvalidArgumentError(absl::StrCat("ATHANOR_TELEMETRY_SOCKET: '", telemetry->second,
                                                     "' is not in ", dir));
    }
    RETURN_IF_ERROR(MakeOwnedDir(dir, uid, 0700));
    mounts.push_back(absl::StrCat("bind:", dir, ":", dir));
  }
  auto uri = options->env.find("ATHANOR_CHECKPOINT_URI");
  if (uri != options->env.end() && absl::StartsWith(uri->second, "file://")) {
    std::string root = std::string(absl::StripSuffix(uri->second.substr(7), "/"));
    if (!UsablePath(root)) {
      return absl::InvalidArgumentError(absl::StrCat("ATHANOR_CHECKPOINT_URI: '", uri->second,
                                                     "' is not an absolute file:// path without ':'"));
    }
    std::string job_dir = root + "/" + key.job_id;
    std::vector<std::string> forbidden = options_.hide;
    forbidden.push_back(options_.work_dir);
    absl::Status made = MakeTenantDir(job_dir, uid, 0750, forbidden);
    if (!made.ok()) return absl::InvalidArgumentError(absl::StrCat("ATHANOR_CHECKPOINT_URI: ", made.message()));
    mounts.push_back(absl::StrCat("bind:", job_dir, ":", job_dir));
  }
  for (const VolumeMountTarget& v : target.volumes) {  // synced down by VolumeSync (volume_sync.h)
    // On the host's read-only root a mount point cannot be made: it must exist.
    if (image_rootfs.empty() && !fs::is_directory(v.path)) {
      return absl::InvalidArgumentError(absl::StrCat("volume '", v.name, "': ", v.path, " is not a folder of this "
                                                     "node's root file system (mount it at one that is, or run the "
                                                     "job in an image)"));
    }
    mounts.push_back(absl::StrCat(v.read_only ? "robind:" : "bind:",
                                  VolumeDir(options_.work_dir, key.job_id, key.attempt, v.name), ":", v.path));
  }
  if (!options->argv.empty()) {
    std::vector<std::string> never_shown = options_.hide;
    never_shown.push_back(options_.work_dir);
    ASSIGN_OR_RETURN(std::vector<std::string> shown, MountsToRun(mounts, options->argv[0], uid, never_shown));
    mounts.insert(mounts.end(), shown.begin(), shown.end());
  }
  if (!image_rootfs.empty()) {  // the job's image (sandbox_image.h)
    std::vector<std::string> never_shown = options_.hide;
    never_shown.push_back(options_.work_dir);
    ASSIGN_OR_RETURN(ImageRun run, PlanImageRun(image_rootfs, mounts, options->argv, uid, never_shown,
                                                HostLibraryDirs()));
    mounts.insert(mounts.end(), run.mounts.begin(), run.mounts.end());
    options->argv = std::move(run.argv);
    if (!run.library_path_append.empty()) {
      std::string& ld = options->env["LD_LIBRARY_PATH"];
      ld = ld.empty() ? run.library_path_append : absl::StrCat(ld, ":", run.library_path_append);
    }
  }
  for (const std::string& m : mounts) {
    std::string dst = m.substr(m.rfind(':') + 1);
    if (!UsablePath(dst)) return absl::InvalidArgumentError(absl::StrCat("sandbox path '", dst, "' is not usable"));
  }
  ASSIGN_OR_RETURN(Box * box, BoxFor(target, share, uid));
  if (target.network.has_value() != box->networked) {  // never a rank on the wrong network
    return absl::FailedPreconditionError("the attempt's box on this node was made with another network");
  }
  mounts.push_back(absl::StrCat("bind:", box->shm_dir, ":/dev/shm"));

  std::map<std::string, std::string> env = options->env;
  const char* path = getenv("PATH");
  env.emplace("PATH", path != nullptr ? path : kDefaultPath);
  env["HOME"] = cwd;
  env["TMPDIR"] = "/tmp";
  for (const std::string& name : options_.pass_env) {
    const char* v = getenv(name.c_str());
    if (v != nullptr) env.emplace(name, v);
  }
  std::string secret = RendezvousSecret(options_.rendezvous_key, key.job_id, key.attempt);
  if (!secret.empty()) env.emplace("ATHANOR_RENDEZVOUS_SECRET", secret);
  // The helper runs as root before it drops privileges: it gets its own
  // environment, and the rank's through a root-only file it applies at the end.
  std::string env_file = EnvFile(key);
  RETURN_IF_ERROR(WriteEnvFile(env_file, env));
  options->env = {{"PATH", kHelperPath}};
  options->inherit_env = false;

  std::vector<std::string> argv = {options_.exec_path, "rank", "--pidns",
                                   absl::StrCat("/proc/", box->holder, "/ns/pid"), "--root", root_dir_,
                                   "--uid", std::to_string(uid), "--gid", std::to_string(uid), "--cwd", cwd,
                                   "--env-file", env_file};
  if (!image_rootfs.empty()) {
    argv.push_back("--image");
    argv.push_back(image_rootfs);
  }
  if (box->networked) {
    argv.push_back("--netns");
    argv.push_back(absl::StrCat("/proc/", box->holder, "/ns/net"));
  }
  for (const auto& [child_fd, unused] : options->pass_fds) {  // the rendezvous socket, for rank 0
    argv.push_back("--keep-fd");
    argv.push_back(std::to_string(child_fd));
  }
  for (const std::string& f : box->cgroup->ProcsFiles()) {
    argv.push_back("--cgroup");
    argv.push_back(f);
  }
  for (const std::string& m : mounts) {
    argv.push_back("--mount");
    argv.push_back(m);
  }
  argv.push_back("--");
  argv.insert(argv.end(), options->argv.begin(), options->argv.end());
  options->argv = std::move(argv);
  options->working_dir.clear();
  box->ranks.insert(key.rank);
  return absl::OkStatus();
}

std::string Sandbox::HiddenBy(const std::vector<std::string>& mounts, const std::string& command) {
  if (command.empty() || command[0] != '/') return "";
  std::string path = fs::path(command).lexically_normal().string();
  std::string best;
  bool hides = false;
  for (const std::string& m : mounts) {
    size_t first = m.find(':');
    size_t last = m.rfind(':');
    if (first == std::string::npos || first == last) continue;
    std::string dst = m.substr(last + 1);
    bool inside = path == dst || (absl::StartsWith(path, dst) && (dst.back() == '/' || path[dst.size()] == '/'));
    if (!inside || dst.size() < best.size()) continue;
    std::string kind = m.substr(0, first);
    best = dst;
    hides = (kind == "ro" || kind == "tmpfs") && last == first + 1;
  }
  return hides ? best : "";
}

absl::Status Sandbox::WrapShell(const RankKey& key, pid_t rank_pid, uint32_t uid, const std::string& cwd,
                                const std::map<std::string, std::string>& env, bool tty, int64_t shell_id,
                                SubprocessOptions* options) {
  auto box = boxes_.find(absl::StrCat(key.job_id, ".", key.attempt));
  if (box == boxes_.end() || !box->second.ranks.contains(key.rank)) {
    return absl::NotFoundError(absl::StrCat("rank ", key.rank, " of job ", key.job_id, " attempt ", key.attempt,
                                            " has no sandbox on this node"));
  }
  if (uid == 0 || rank_pid <= 1) return absl::InvalidArgumentError("a shell runs as the rank's uid, never root");
  std::string env_file = absl::StrCat(EnvFile(key), ".shell-", shell_id);
  RETURN_IF_ERROR(WriteEnvFile(env_file, env));
  std::vector<std::string> argv = {options_.exec_path, "enter", "--pid", std::to_string(rank_pid),
                                   "--uid", std::to_string(uid), "--gid", std::to_string(uid),
                                   "--cwd", cwd, "--env-file", env_file};
  for (const std::string& f : box->second.cgroup->ProcsFiles()) {
    argv.push_back("--cgroup");
    argv.push_back(f);
  }
  if (tty) argv.push_back("--tty");
  argv.push_back("--");
  argv.insert(argv.end(), options->argv.begin(), options->argv.end());
  options->argv = std::move(argv);
  options->env = {{"PATH", kHelperPath}};
  options->inherit_env = false;
  options->working_dir.clear();
  return absl::OkStatus();
}

std::string Sandbox::EnvFile(const RankKey& key) const {
  return absl::StrCat(env_dir_, "/", key.job_id, ".", key.attempt, ".", key.rank, ".env");
}

std::string Sandbox::Ended(const RankKey& key, int signal) {
  unlink(EnvFile(key).c_str());  // the helper unlinks it once read; not if it never ran
  std::string name = absl::StrCat(key.job_id, ".", key.attempt);
  auto it = boxes_.find(name);
  if (it == boxes_.end()) return "";
  Box& box = it->second;
  std::string message;
  if (signal == SIGKILL && box.cgroup && box.cgroup->OomKills() > 0) message = "out of memory";
  box.ranks.erase(key.rank);
  if (box.ranks.empty()) {
    EndBox(name, box);
    boxes_.erase(it);
  }
  return message;
}

}  // namespace athanor::agent
