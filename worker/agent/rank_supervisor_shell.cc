// RankSupervisor::StartShell (rank_supervisor.h): a command started beside a
// running rank, in its sandbox, for a shell (shell_session.h).
#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "worker/agent/rank_supervisor.h"
#include "worker/agent/sandbox.h"

namespace athanor::agent {
namespace {

// Bounds on what is read of a rank's /proc files (its environment is at
// most 1 MiB and 4096 variables: Sandbox refuses bigger ones first).
constexpr size_t kMaxProcFileBytes = size_t{1} << 20;
constexpr size_t kMaxEnvVars = 4096;

absl::StatusOr<std::string> ReadProcFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", strerror(errno)));
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > kMaxProcFileBytes) {
      close(fd);
      return absl::FailedPreconditionError(absl::StrCat(path, " is over ", kMaxProcFileBytes, " bytes"));
    }
  }
  close(fd);
  return out;
}

// The rank process itself: in a sandbox, the only child of its helper
// (athanor-sandbox-exec rank stays as its parent outside the namespace).
absl::StatusOr<pid_t> RankProcess(pid_t helper) {
  ASSIGN_OR_RETURN(std::string children,
                   ReadProcFile(absl::StrCat("/proc/", helper, "/task/", helper, "/children")));
  for (absl::string_view word : absl::StrSplit(children, ' ', absl::SkipWhitespace())) {
    int pid = 0;
    if (absl::SimpleAtoi(word, &pid) && pid > 1) return pid;
  }
  return absl::FailedPreconditionError("the rank's process has not started yet (or has ended)");
}

// The rank's environment as it started (NAME=VALUE entries ended by NULs).
absl::StatusOr<std::map<std::string, std::string>> RankEnv(pid_t pid) {
  ASSIGN_OR_RETURN(std::string bytes, ReadProcFile(absl::StrCat("/proc/", pid, "/environ")));
  std::map<std::string, std::string> env;
  for (absl::string_view entry : absl::StrSplit(bytes, '\0', absl::SkipEmpty())) {
    size_t eq = entry.find('=');
    if (eq == 0 || eq == absl::string_view::npos) continue;
    if (env.size() == kMaxEnvVars) break;
    env.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  return env;
}

// The real uid of `pid` (its /proc status).
absl::StatusOr<uint32_t> ProcessUid(pid_t pid) {
  ASSIGN_OR_RETURN(std::string status, ReadProcFile(absl::StrCat("/proc/", pid, "/status")));
  for (absl::string_view line : absl::StrSplit(status, '\n')) {
    if (!absl::ConsumePrefix(&line, "Uid:")) continue;
    std::vector<absl::string_view> ids = absl::StrSplit(line, '\t', absl::SkipWhitespace());
    uint32_t uid = 0;
    if (!ids.empty() && absl::SimpleAtoi(ids[0], &uid)) return uid;
  }
  return absl::FailedPreconditionError(absl::StrCat("no uid in /proc/", pid, "/status"));
}

}  // namespace

absl::StatusOr<pid_t> RankSupervisor::StartShell(const RankKey& key, const std::string& tenant,
                                                 const std::vector<std::string>& command, const std::string& term,
                                                 bool tty, int stdin_fd, int stdout_fd) {
  if (command.empty()) return absl::InvalidArgumentError("no command");
  absl::MutexLock lock(&mu_);  // the reaper checks foreign_ under mu_, after the fork
  auto it = ranks_.find(key);
  if (it == ranks_.end() || it->second.report.phase != RankPhase::kRunning || !it->second.process) {
    return absl::NotFoundError(absl::StrCat("rank ", key.rank, " of job ", key.job_id, " attempt ", key.attempt,
                                            " does not run on this node"));
  }
  const pid_t leader = it->second.process->pid();
  pid_t rank_pid = leader;
  if (sandbox_ != nullptr) {
    ASSIGN_OR_RETURN(rank_pid, RankProcess(leader));
  }
  ASSIGN_OR_RETURN(auto env, RankEnv(rank_pid));
  env["TERM"] = term;
  SubprocessOptions options;
  options.argv = command;
  if (sandbox_ != nullptr) {
    ASSIGN_OR_RETURN(uint32_t uid, ProcessUid(rank_pid));
    if (!tenant.empty() && uid != sandbox_->TenantUid(tenant)) {
      return absl::PermissionDeniedError(absl::StrCat("rank ", key.rank, " of job ", key.job_id,
                                                      " is not tenant '", tenant, "''s"));
    }
    auto home = env.find("HOME");
    std::string cwd = home != env.end() ? home->second : "/";
    RETURN_IF_ERROR(sandbox_->WrapShell(key, rank_pid, uid, cwd, env, tty, ++shells_started_, &options));
  } else {
    char cwd[4096];
    ssize_t n = readlink(absl::StrCat("/proc/", rank_pid, "/cwd").c_str(), cwd, sizeof(cwd) - 1);
    options.working_dir = n > 0 ? std::string(cwd, static_cast<size_t>(n)) : "/";
    options.env = std::move(env);
    options.inherit_env = false;
  }
  // Everything the child needs, made before fork (the agent has threads).
  std::vector<std::string> env_entries;
  for (const auto& [name, value] : options.env) env_entries.push_back(absl::StrCat(name, "=", value));
  std::vector<char*> argv, envp;
  for (std::string& a : options.argv) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (std::string& e : env_entries) envp.push_back(e.data());
  envp.push_back(nullptr);
  const bool own_terminal = tty && sandbox_ == nullptr;  // in a sandbox, the helper's child takes it
  pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
  if (pid == 0) {
    setsid();
    if (dup2(stdin_fd, 0) < 0 || dup2(stdout_fd, 1) < 0 || dup2(stdout_fd, 2) < 0) _exit(127);
    syscall(SYS_close_range, 3, ~0U, 0);
    if (own_terminal) ioctl(0, TIOCSCTTY, 0);
    if (!options.working_dir.empty() && chdir(options.working_dir.c_str()) != 0) _exit(127);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);  // the agent blocks SIGTERM/SIGINT for its waiter
    execvpe(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  foreign_.insert(pid);
  return pid;
}

}  // namespace athanor::agent
