// athanor-sandbox-exec: how the agent starts a rank in its sandbox (run as
// root by the agent only; see sandbox.h for the policy and docs/security.md).
//
//   athanor-sandbox-exec holder [--net]
//       Makes a PID namespace for one job attempt: its pid 1 reaps (and ends
//       itself once alone in the namespace for two 10 s checks), and
//       this process prints pid 1's host pid and exits. SIGKILLing that pid
//       ends every process in the namespace. With --net, pid 1 also has a
//       network namespace of its own, with loopback up and IPv6 off (the
//       agent joins it to the host: job_network.h).
//
//   athanor-sandbox-exec rank --pidns FILE --root DIR --uid U --gid G --cwd DIR
//       --env-file FILE [--netns FILE] [--image ROOTFS] [--keep-fd N]... [--cgroup PROCS_FILE]...
//       [--mount KIND:SRC:DST]... -- COMMAND...
//       Joins the attempt's PID namespace (and its network namespace, with
//       --netns: the holder's) and forks the rank; places it in
//       the job's cgroups before it runs anything; in a new mount namespace
//       builds a read-only view of "/" under DIR with the listed mounts
//       (KIND tmpfs: DST empty and private; ro: tmpfs then read-only; bind:
//       SRC writable at DST; robind: SRC read-only at DST; rofile: the one
//       file SRC read-only at DST; dev: device node SRC at DST; proc; sysfs:
//       read-only, of the rank's network namespace), pivots into
//       it, drops to U:G with no capabilities and no_new_privs, and execs
//       COMMAND with the environment read from FILE (looked up on that
//       environment's PATH). With --image ROOTFS the new root is built from
//       that tree instead of "/": a tmpfs holding the image's entries bound
//       read-only, nosuid, nodev, read-only itself once the listed mounts are
//       in place (BuildImageRoot). Descriptors above 2 are closed but for each
//       --keep-fd N (N >= 3), which the rank inherits (rank 0's rendezvous
//       socket, bound by the agent). This process stays as the
//       rank's parent outside the namespace, ignores SIGTERM/SIGINT (the
//       agent signals the whole process group) and exits as the rank did.
//
//   athanor-sandbox-exec enter --pid P --uid U --gid G --cwd DIR --env-file FILE
//       [--cgroup PROCS_FILE]... [--tty] -- COMMAND...
//       A shell in the running rank whose host pid is P (shell_session.h):
//       forks COMMAND into P's PID namespace, places it in the job's cgroups
//       before it runs anything, joins P's network and mount namespaces (the
//       rank's own view: its root, image, work folder and mounts), starts a
//       session (with --tty, stdin becomes its controlling terminal), drops
//       to U:G with no capabilities and no_new_privs, and execs COMMAND with
//       the environment read from FILE, as `rank` does. This process stays
//       outside as its parent: SIGHUP is passed on to the command's process
//       group, SIGTERM becomes a SIGKILL of it, and it exits as the command did.
//
// The rank's environment is the tenant's: it never becomes this process's.
// The agent starts the helper with an environment of its own (PATH alone) and
// writes the rank's into FILE, a root-owned 0600 file in a root-only folder:
// NAME=VALUE entries, each ended by a NUL, at most kMaxEnvVars of them and
// kMaxEnvBytes in all. The helper reads and unlinks it while still root and
// applies it only in the rank's execve, after dropping privileges. Run as
// root in the host's namespaces, the helper trusts nothing the loader reads:
// it is linked statically (worker/agent/CMakeLists.txt), and it refuses to
// run when its own environment holds anything but PATH (LD_PRELOAD,
// GCONV_PATH, GLIBC_TUNABLES, ...), in case it is ever started some other way.
//
// Errors before exec go to stderr (the rank's log) with exit code 127.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <grp.h>
#include <linux/capability.h>

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace {

// Bounds on the rank's environment (sandbox.cc refuses bigger ones first).
constexpr size_t kMaxEnvVars = 4096;
constexpr size_t kMaxEnvBytes = size_t{1} << 20;

struct MountOp {
  std::string kind, src, dst;
};

struct RankArgs {
  std::string pidns, netns, root, cwd;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<std::string> cgroups;
  std::vector<int> keep_fds;  // inherited by the rank
  std::vector<MountOp> mounts;
  std::vector<char*> command;
  std::string env_file;
  std::string image;         // --image: the rank's root filesystem instead of the host's "/"
  std::string env_bytes;     // the entries, each NUL-terminated
  std::vector<char*> env;    // into env_bytes, ending with nullptr
};

[[noreturn]] void Die(const std::string& what) {
  std::string msg = "athanor-sandbox-exec: " + what + (errno ? std::string(": ") + strerror(errno) : "") + "\n";
  ssize_t unused = write(STDERR_FILENO, msg.data(), msg.size());
  (void)unused;
  _exit(127);
}

// Refuses an environment of its own holding anything but PATH: the agent
// gives the helper PATH alone, and every other variable is one the loader or
// libc might act on as root (LD_*, GCONV_PATH, GLIBC_TUNABLES, MALLOC_*, ...).
void RefuseForeignEnvironment() {
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (strncmp(*e, "PATH=", 5) == 0) continue;
    const char* eq = strchr(*e, '=');
    std::string name = eq != nullptr ? std::string(*e, eq - *e) : std::string(*e);
    errno = 0;
    Die("refusing to run with " + name.substr(0, 64) +
        " in the helper's own environment (the agent passes a rank's environment in --env-file)");
  }
}

// Reads the rank's environment from `a->env_file` (root's, 0600, bounded)
// and unlinks the file.
void ReadEnvFile(RankArgs* a) {
  int fd = open(a->env_file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) Die("open " + a->env_file);
  struct stat st;
  if (fstat(fd, &st) != 0) Die("stat " + a->env_file);
  errno = 0;
  if (!S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 077) != 0) {
    Die(a->env_file + " is not a regular file of root's, mode 0600");
  }
  if (st.st_size < 0 || static_cast<uint64_t>(st.st_size) > kMaxEnvBytes) {
    Die(a->env_file + ": the environment is over " + std::to_string(kMaxEnvBytes) + " bytes");
  }
  a->env_bytes.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < a->env_bytes.size()) {
    ssize_t n = read(fd, a->env_bytes.data() + got, a->env_bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) Die("read " + a->env_file);
    got += static_cast<size_t>(n);
  }
  close(fd);
  if (unlink(a->env_file.c_str()) != 0) Die("unlink " + a->env_file);
  errno = 0;
  if (!a->env_bytes.empty() && a->env_bytes.back() != '\0') Die(a->env_file + ": the last entry is not ended");
  for (size_t at = 0; at < a->env_bytes.size();) {
    char* entry = a->env_bytes.data() + at;
    size_t len = strlen(entry);
    const char* eq = static_cast<const char*>(memchr(entry, '=', len));
    if (eq == nullptr || eq == entry) Die(a->env_file + ": an entry is not NAME=VALUE");
    if (a->env.size() == kMaxEnvVars) Die(a->env_file + ": over " + std::to_string(kMaxEnvVars) + " variables");
    a->env.push_back(entry);
    at += len + 1;
  }
  a->env.push_back(nullptr);
}

void CloseExtraFds(const std::vector<int>& keep) {
  for (int fd = 3; fd < 1024; ++fd) {
    if (std::find(keep.begin(), keep.end(), fd) == keep.end()) close(fd);
  }
}

// Processes in this PID namespace (its own /proc).
int CountProcesses() {
  int n = 0;
  if (DIR* d = opendir("/proc")) {
    while (dirent* e = readdir(d)) n += atoi(e->d_name) > 0;
    closedir(d);
  }
  return n;
}

// Pid 1 of a job's namespace: reaps orphans until killed, or until it has
// been alone for two checks in a row (its ranks ended while no agent was
// there to end the box, e.g. the agent was SIGKILLed and not restarted).
[[noreturn]] void HolderInit() {
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, nullptr);
  bool counting = unshare(CLONE_NEWNS) == 0 &&
                  mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
                  mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) == 0;
  int alone = 0;
  const timespec period{10, 0};
  for (;;) {
    if (sigtimedwait(&all, nullptr, &period) < 0 && errno == EAGAIN && counting) {
      alone = CountProcesses() <= 1 ? alone + 1 : 0;
      if (alone >= 2) _exit(0);
    }
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
  }
}

// In a new network namespace: IPv6 off (no link-local address reaches the
// host) and loopback up, as ranks expect.
void MakeNetworkNamespace() {
  if (unshare(CLONE_NEWNET) != 0) Die("unshare(CLONE_NEWNET)");
  for (const char* path : {"/proc/sys/net/ipv6/conf/all/disable_ipv6", "/proc/sys/net/ipv6/conf/default/disable_ipv6"}) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) continue;  // a kernel without IPv6
    if (write(fd, "1", 1) != 1) Die(std::string("write ") + path);
    close(fd);
  }
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) Die("socket");
  ifreq ifr{};
  strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (ioctl(s, SIOCGIFFLAGS, &ifr) != 0) Die("SIOCGIFFLAGS lo");
  ifr.ifr_flags |= IFF_UP;
  if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0) Die("bring lo up");
  close(s);
}

int Holder(bool net) {
  CloseExtraFds({});
  if (net) MakeNetworkNamespace();
  if (unshare(CLONE_NEWPID) != 0) Die("unshare(CLONE_NEWPID)");
  pid_t pid = fork();
  if (pid < 0) Die("fork");
  if (pid == 0) {
    setsid();
    int null_fd = open("/dev/null", O_RDWR);  // let the agent see EOF on our stdout
    for (int fd = 0; fd < 3; ++fd) dup2(null_fd, fd);
    if (null_fd > 2) close(null_fd);
    HolderInit();
  }
  printf("%d\n", pid);
  return 0;
}

int Depth(const std::string& path) { return static_cast<int>(std::count(path.begin(), path.end(), '/')); }

void MkdirAll(const std::string& path, mode_t mode) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      std::string part = path.substr(0, i);
      if (mkdir(part.c_str(), mode) != 0 && errno != EEXIST) Die("mkdir " + part);
    }
  }
  errno = 0;
}

void Touch(const std::string& path) {
  MkdirAll(path.substr(0, path.rfind('/')), 0755);
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0 && errno != EEXIST) Die("create " + path);
  if (fd >= 0) close(fd);
  errno = 0;
}

struct MountAttr {  // struct mount_attr of <linux/mount.h>
  uint64_t attr_set, attr_clr, propagation, userns_fd;
};
constexpr uint64_t kAttrRdonly = 0x1, kAttrNosuid = 0x2, kAttrNodev = 0x4;

void SetAttr(const std::string& path, uint64_t set, bool recursive) {
  MountAttr attr{set, 0, 0, 0};
  if (syscall(SYS_mount_setattr, AT_FDCWD, path.c_str(), recursive ? AT_RECURSIVE : 0, &attr,
              sizeof(attr)) != 0) {
    Die("mount_setattr " + path);
  }
}

// An image root (--image): a tmpfs whose entries are the image's, each bound
// read-only, nosuid, nodev (symlinks copied as they are). Where a mount of
// the rank's lies inside an image folder, that folder is a tmpfs folder
// instead, its entries bound one by one, down to the mount point; an image
// symlink or file on the way is shadowed by a folder, so that no mount point
// is ever reached through a link of the image's (which would resolve in the
// host's tree here, before pivot_root). BuildRoot makes the tmpfs read-only
// once every mount is in place.
void PopulateFromImage(const std::string& src, const std::string& dst, const std::string& rel,
                       const std::vector<MountOp>& ops) {
  DIR* d = opendir(src.c_str());
  if (d == nullptr) Die("open image folder " + src);
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(d);
  for (const std::string& name : names) {
    std::string path = rel + "/" + name;
    bool exact = false, above = false;
    for (const MountOp& op : ops) {
      exact = exact || op.dst == path;
      above = above || (op.dst.size() > path.size() && op.dst.compare(0, path.size(), path) == 0 &&
                        op.dst[path.size()] == '/');
    }
    if (exact) continue;  // the rank's mount makes its own mount point
    std::string from = src + "/" + name, to = dst + "/" + name;
    struct stat st;
    if (lstat(from.c_str(), &st) != 0) Die("stat " + from);
    if (above) {
      if (mkdir(to.c_str(), 0755) != 0) Die("mkdir " + to);
      if (S_ISDIR(st.st_mode)) {
        if (chmod(to.c_str(), st.st_mode & 0777) != 0) Die("chmod " + to);
        PopulateFromImage(from, to, path, ops);
      }
    } else if (S_ISDIR(st.st_mode)) {
      if (mkdir(to.c_str(), 0755) != 0) Die("mkdir " + to);
      if (mount(from.c_str(), to.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) Die("bind image " + from);
      SetAttr(to, kAttrRdonly | kAttrNosuid | kAttrNodev, true);
    } else if (S_ISLNK(st.st_mode)) {
      std::vector<char> target(PATH_MAX + 1);
      ssize_t n = readlink(from.c_str(), target.data(), target.size() - 1);
      if (n < 0) Die("readlink " + from);
      target[static_cast<size_t>(n)] = '\0';
      if (symlink(target.data(), to.c_str()) != 0) Die("symlink " + to);
    } else if (S_ISREG(st.st_mode)) {
      int fd = open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0) Die("create " + to);
      close(fd);
      if (mount(from.c_str(), to.c_str(), nullptr, MS_BIND, nullptr) != 0) Die("bind image " + from);
      SetAttr(to, kAttrRdonly | kAttrNosuid | kAttrNodev, false);
    }
    // Anything else (never in an unpacked image: UnpackTree refuses it) is left out.
  }
  errno = 0;
}

void BuildImageRoot(const RankArgs& a) {
  if (mount("tmpfs", a.root.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0) Die("tmpfs at " + a.root);
  PopulateFromImage(a.image, a.root, "", a.mounts);
}

void BuildRoot(const RankArgs& a) {
  if (unshare(CLONE_NEWNS) != 0) Die("unshare(CLONE_NEWNS)");
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) Die("make / private");
  const std::string& r = a.root;
  if (a.image.empty()) {
    if (mount("/", r.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) Die("bind / at " + r);
    SetAttr(r, kAttrRdonly | kAttrNosuid | kAttrNodev, true);
  } else {
    BuildImageRoot(a);
  }
  // Shallow paths first, so that deeper mounts land inside earlier ones.
  std::vector<MountOp> ops = a.mounts;
  std::stable_sort(ops.begin(), ops.end(),
                   [](const MountOp& x, const MountOp& y) { return Depth(x.dst) < Depth(y.dst); });
  std::vector<std::string> readonly_later;
  for (const MountOp& op : ops) {
    std::string dst = r + op.dst;
    if (op.kind == "tmpfs" || op.kind == "ro") {
      MkdirAll(dst, 0755);
      const char* data = op.kind == "tmpfs" ? "mode=1777" : "mode=0755";
      if (mount("tmpfs", dst.c_str(), "tmpfs", MS_NOSUID, data) != 0) Die("tmpfs at " + op.dst);
      if (op.kind == "ro") readonly_later.push_back(dst);
    } else if (op.kind == "bind") {
      MkdirAll(dst, 0755);
      if (mount(op.src.c_str(), dst.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
        Die("bind " + op.src + " at " + op.dst);
      }
      SetAttr(dst, kAttrNosuid, false);
    } else if (op.kind == "robind") {
      MkdirAll(dst, 0755);
      if (mount(op.src.c_str(), dst.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
        Die("bind " + op.src + " at " + op.dst);
      }
      SetAttr(dst, kAttrRdonly | kAttrNosuid, true);
    } else if (op.kind == "rofile") {  // one file of a hidden folder, read-only
      Touch(dst);
      if (mount(op.src.c_str(), dst.c_str(), nullptr, MS_BIND, nullptr) != 0) {
        Die("bind " + op.src + " at " + op.dst);
      }
      SetAttr(dst, kAttrRdonly | kAttrNosuid | kAttrNodev, false);
    } else if (op.kind == "dev") {
      Touch(dst);
      if (mount(op.src.c_str(), dst.c_str(), nullptr, MS_BIND, nullptr) != 0) {
        Die("bind device " + op.src + " at " + op.dst);
      }
    } else if (op.kind == "proc") {
      MkdirAll(dst, 0555);
      if (mount("proc", dst.c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
        Die("mount proc");
      }
    } else if (op.kind == "sysfs") {  // the rank's network namespace's view (its interfaces)
      MkdirAll(dst, 0555);
      if (mount("sysfs", dst.c_str(), "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
        Die("mount sysfs");
      }
    } else if (op.kind == "link") {
      if (symlink(op.src.c_str(), dst.c_str()) != 0 && errno != EEXIST) Die("symlink " + op.dst);
      errno = 0;
    } else {
      Die("unknown mount kind " + op.kind);
    }
  }
  for (const std::string& dst : readonly_later) SetAttr(dst, kAttrRdonly, false);
  if (!a.image.empty()) SetAttr(r, kAttrRdonly, false);  // the image root's skeleton, now complete
  if (chdir(r.c_str()) != 0) Die("chdir " + r);
  if (syscall(SYS_pivot_root, ".", ".") != 0) Die("pivot_root");
  if (umount2(".", MNT_DETACH) != 0) Die("detach the old root");
  if (chdir("/") != 0) Die("chdir /");
}

void DropPrivileges(const RankArgs& a) {
  for (int cap = 0; cap <= CAP_LAST_CAP; ++cap) prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
  if (setgroups(0, nullptr) != 0) Die("setgroups");
  if (setresgid(a.gid, a.gid, a.gid) != 0) Die("setresgid");
  if (setresuid(a.uid, a.uid, a.uid) != 0) Die("setresuid");
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) Die("no_new_privs");
  // Changing uid left no capability; check, since running as root would be worse than failing.
  if (getuid() == 0 || geteuid() == 0) Die("still root after setresuid");
}

[[noreturn]] void ExitLike(int status) {
  if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
  int sig = WIFSIGNALED(status) ? WTERMSIG(status) : SIGKILL;
  signal(sig, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
  kill(getpid(), sig);
  _exit(128 + sig);
}

int Rank(const RankArgs& a) {
  CloseExtraFds(a.keep_fds);
  for (int fd : a.keep_fds) {
    if (fcntl(fd, F_GETFD) < 0) Die("--keep-fd " + std::to_string(fd) + ": not an open descriptor");
  }
  if (!a.netns.empty()) {
    int net = open(a.netns.c_str(), O_RDONLY | O_CLOEXEC);
    if (net < 0) Die("open " + a.netns);
    if (setns(net, CLONE_NEWNET) != 0) Die("setns " + a.netns);
    close(net);
  }
  int ns = open(a.pidns.c_str(), O_RDONLY | O_CLOEXEC);
  if (ns < 0) Die("open " + a.pidns);
  if (setns(ns, CLONE_NEWPID) != 0) Die("setns " + a.pidns);
  close(ns);
  int go[2];
  if (pipe2(go, O_CLOEXEC) != 0) Die("pipe");
  pid_t pid = fork();
  if (pid < 0) Die("fork");
  if (pid == 0) {
    close(go[1]);
    char byte;
    if (read(go[0], &byte, 1) != 1) _exit(127);  // the parent failed; it said why
    close(go[0]);
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    BuildRoot(a);
    DropPrivileges(a);
    if (chdir(a.cwd.c_str()) != 0) Die("chdir " + a.cwd);
    // Only now, as the tenant's uid, the tenant's environment: execvp looks
    // the command up on its PATH and passes it on.
    environ = const_cast<char**>(a.env.data());
    execvp(a.command[0], a.command.data());
    Die(std::string("cannot execute '") + a.command[0] + "'");
  }
  close(go[0]);
  for (const std::string& procs : a.cgroups) {
    int fd = open(procs.c_str(), O_WRONLY | O_CLOEXEC);
    std::string text = std::to_string(pid);
    if (fd < 0 || write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
      int e = errno;
      kill(pid, SIGKILL);
      errno = e;
      Die("join cgroup " + procs);
    }
    close(fd);
  }
  signal(SIGTERM, SIG_IGN);
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  if (write(go[1], "g", 1) != 1) Die("start the rank");
  close(go[1]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) Die("waitpid");
  }
  ExitLike(status);
}

// The `enter` child's process group, for the signal handlers of its parent.
volatile pid_t g_entered = 0;

void PassOnSignal(int sig) {
  pid_t pid = g_entered;
  if (pid <= 0) return;
  if (sig == SIGHUP) {
    kill(-pid, SIGHUP);
    kill(-pid, SIGCONT);
  } else {
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
  }
}

// `enter`: COMMAND inside the running rank `pid`'s sandbox (see the header).
int Enter(const RankArgs& a, pid_t target, bool tty) {
  CloseExtraFds({});
  const std::string proc = "/proc/" + std::to_string(target);
  int pid_ns = open((proc + "/ns/pid").c_str(), O_RDONLY | O_CLOEXEC);
  int net_ns = open((proc + "/ns/net").c_str(), O_RDONLY | O_CLOEXEC);
  int mnt_ns = open((proc + "/ns/mnt").c_str(), O_RDONLY | O_CLOEXEC);
  if (pid_ns < 0 || net_ns < 0 || mnt_ns < 0) Die("open the namespaces of rank process " + std::to_string(target));
  if (setns(pid_ns, CLONE_NEWPID) != 0) Die("setns pid of " + std::to_string(target));
  int go[2];
  if (pipe2(go, O_CLOEXEC) != 0) Die("pipe");
  pid_t pid = fork();
  if (pid < 0) Die("fork");
  if (pid == 0) {
    close(go[1]);
    char byte;
    if (read(go[0], &byte, 1) != 1) _exit(127);  // the parent failed; it said why
    close(go[0]);
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (setns(net_ns, CLONE_NEWNET) != 0) Die("setns net of " + std::to_string(target));
    if (setns(mnt_ns, CLONE_NEWNS) != 0) Die("setns mnt of " + std::to_string(target));
    close(pid_ns);
    close(net_ns);
    close(mnt_ns);
    if (setsid() < 0) Die("setsid");
    if (tty && ioctl(STDIN_FILENO, TIOCSCTTY, 0) != 0) Die("make the terminal the controlling one");
    DropPrivileges(a);
    if (chdir(a.cwd.c_str()) != 0 && chdir("/") != 0) Die("chdir " + a.cwd);
    errno = 0;
    environ = const_cast<char**>(a.env.data());
    execvp(a.command[0], a.command.data());
    Die(std::string("cannot execute '") + a.command[0] + "'");
  }
  close(go[0]);
  close(pid_ns);
  close(net_ns);
  close(mnt_ns);
  for (const std::string& procs : a.cgroups) {
    int fd = open(procs.c_str(), O_WRONLY | O_CLOEXEC);
    std::string text = std::to_string(pid);
    if (fd < 0 || write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
      int e = errno;
      kill(pid, SIGKILL);
      errno = e;
      Die("join cgroup " + procs);
    }
    close(fd);
  }
  g_entered = pid;
  struct sigaction pass {};
  pass.sa_handler = PassOnSignal;
  sigaction(SIGHUP, &pass, nullptr);
  sigaction(SIGTERM, &pass, nullptr);
  signal(SIGINT, SIG_IGN);
  // The terminal stays the agent's: this process lets go of it.
  int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (write(go[1], "g", 1) != 1) Die("start the command");
  close(go[1]);
  if (null_fd >= 0) {
    dup2(null_fd, STDIN_FILENO);
    dup2(null_fd, STDOUT_FILENO);
    close(null_fd);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) Die("waitpid");
  }
  ExitLike(status);
}

bool ParseId(const char* text, unsigned* out) {
  char* end = nullptr;
  errno = 0;
  unsigned long v = strtoul(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v == 0 || v > 0xfffffffeUL) return false;
  *out = static_cast<unsigned>(v);
  return true;
}

int Usage(const std::string& why) {
  fprintf(stderr, "athanor-sandbox-exec: %s\nusage: athanor-sandbox-exec holder [--net] | rank --pidns F --root D "
                  "--uid U --gid G --cwd D --env-file F [--netns F] [--image D] [--cgroup F]... [--mount KIND:SRC:DST]... -- COMMAND...\n",
          why.c_str());
  return 127;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    printf("athanor-sandbox-exec: the agent's helper that builds a rank's sandbox (run as root by\n"
           "athanor-agent only; see worker/agent/sandbox.h and docs/security.md)\n"
           "usage: athanor-sandbox-exec holder [--net]\n"
           "         make a job attempt's PID namespace (and network namespace); prints its pid 1\n"
           "       athanor-sandbox-exec rank --pidns F --root D --uid U --gid G --cwd D --env-file F\n"
           "                            [--netns F] [--image D] [--keep-fd N]... [--cgroup F]... [--mount KIND:SRC:DST]... -- COMMAND...\n"
           "         run COMMAND in that namespace, in a new mount namespace, as U:G, with the\n"
           "         environment in F (NAME=VALUE entries ended by NULs; root's, 0600; unlinked)\n"
           "       athanor-sandbox-exec enter --pid P --uid U --gid G --cwd D --env-file F [--cgroup F]... [--tty]\n"
           "                            -- COMMAND...\n"
           "         run COMMAND in the sandbox of the running rank P (its namespaces, cgroups), as U:G\n");
    return 0;
  }
  RefuseForeignEnvironment();
  if (argc == 2 && std::string(argv[1]) == "holder") return Holder(false);
  if (argc == 3 && std::string(argv[1]) == "holder" && std::string(argv[2]) == "--net") return Holder(true);
  if (argc >= 2 && std::string(argv[1]) == "holder") return Usage("holder takes only --net");
  const bool enter = argc >= 2 && std::string(argv[1]) == "enter";
  if (argc < 2 || (std::string(argv[1]) != "rank" && !enter)) return Usage("expected 'holder', 'rank' or 'enter'");
  RankArgs a;
  unsigned enter_pid = 0;
  bool tty = false;
  int i = 2;
  for (; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--") {
      ++i;
      break;
    }
    if (enter && flag == "--tty") {
      tty = true;
      continue;
    }
    if (i + 1 >= argc) return Usage(flag + " needs a value");
    std::string value = argv[++i];
    if (enter && flag == "--pid") {
      if (!ParseId(value.c_str(), &enter_pid) || enter_pid == 1) return Usage("--pid: expected a rank's pid, got " + value);
    } else if (flag == "--pidns") {
      a.pidns = value;
    } else if (flag == "--netns") {
      a.netns = value;
    } else if (flag == "--root") {
      a.root = value;
    } else if (flag == "--image") {
      if (value.empty() || value[0] != '/') return Usage("--image: expected an absolute path, got " + value);
      a.image = value;
    } else if (flag == "--cwd") {
      a.cwd = value;
    } else if (flag == "--uid") {
      if (!ParseId(value.c_str(), &a.uid)) return Usage("--uid: expected a non-root uid, got " + value);
    } else if (flag == "--gid") {
      if (!ParseId(value.c_str(), &a.gid)) return Usage("--gid: expected a non-root gid, got " + value);
    } else if (flag == "--env-file") {
      a.env_file = value;
    } else if (flag == "--keep-fd") {
      unsigned fd = 0;
      if (!ParseId(value.c_str(), &fd) || fd < 3 || fd >= 1024) return Usage("--keep-fd: expected 3..1023, got " + value);
      a.keep_fds.push_back(static_cast<int>(fd));
    } else if (flag == "--cgroup") {
      a.cgroups.push_back(value);
    } else if (flag == "--mount") {
      size_t c1 = value.find(':'), c2 = value.find(':', c1 + 1);
      if (c1 == std::string::npos || c2 == std::string::npos || value.size() <= c2 + 1 || value[c2 + 1] != '/') {
        return Usage("--mount: expected KIND:SRC:/DST, got " + value);
      }
      a.mounts.push_back({value.substr(0, c1), value.substr(c1 + 1, c2 - c1 - 1), value.substr(c2 + 1)});
    } else {
      return Usage("unknown flag " + flag);
    }
  }
  for (; i < argc; ++i) a.command.push_back(argv[i]);
  a.command.push_back(nullptr);
  if (a.command.size() < 2) return Usage("no command");
  if (enter) {
    if (enter_pid == 0 || a.cwd.empty() || a.env_file.empty() || a.uid == 0 || a.gid == 0) {
      return Usage("enter: --pid, --cwd, --env-file, --uid and --gid are required");
    }
    ReadEnvFile(&a);
    return Enter(a, static_cast<pid_t>(enter_pid), tty);
  }
  if (a.pidns.empty() || a.root.empty() || a.cwd.empty() || a.env_file.empty() || a.uid == 0 || a.gid == 0) {
    return Usage("--pidns, --root, --cwd, --env-file, --uid and --gid are required");
  }
  ReadEnvFile(&a);
  return Rank(a);
}
