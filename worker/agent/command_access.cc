#include "worker/agent/command_access.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "worker/agent/sandbox.h"

namespace athanor::agent {
namespace {

namespace fs = std::filesystem;

// Folders the sandbox hides by default and may show single files of.
constexpr const char* kShowable[] = {"/root", "/home", "/run", "/tmp"};

bool Under(const std::string& path, const std::string& dir) {
  return path == dir || (absl::StartsWith(path, dir) && (dir.back() == '/' || path[dir.size()] == '/'));
}

std::string WayOut(const std::string& file, uid_t uid) {
  return absl::StrCat("make it readable and executable by uid ", uid,
                      " (the tenant's) through every parent folder (for example chmod o+rx ", file,
                      " and o+x on each folder above it), or install it where ranks see it (for "
                      "example /usr/local/bin or /opt)");
}

// The mount that shows `file` (its real path `real`) to a rank as `uid`, or why not.
absl::StatusOr<std::string> ShowFile(const std::vector<std::string>& mounts, const std::string& file,
                                     uid_t uid, const std::vector<std::string>& never_shown) {
  std::string hidden = Sandbox::HiddenBy(mounts, file);
  if (hidden.empty()) return std::string();
  std::string prefix = absl::StrCat("the command ", file, " lies under ", hidden,
                                    ", which the rank's sandbox hides");
  bool showable = false;
  for (const char* dir : kShowable) showable = showable || hidden == dir;
  std::error_code ec;
  std::string real = fs::canonical(file, ec).string();
  if (ec) return absl::FailedPreconditionError(absl::StrCat(prefix, ", and it cannot be found: ", ec.message()));
  if (real.find(':') != std::string::npos) {
    return absl::FailedPreconditionError(absl::StrCat(prefix, ", and its path ", real, " holds a ':'"));
  }
  for (const std::string& dir : never_shown) showable = showable && !Under(real, dir) && !Under(file, dir);
  if (!showable) {
    return absl::FailedPreconditionError(absl::StrCat(
        prefix, " and never shows to ranks (the agent's work dir and its --sandbox-hide paths); install it "
                "where ranks see it (for example /usr/local/bin or /opt)"));
  }
  // The real path must not lead somewhere hidden for good either (a link into the work dir).
  std::string real_hidden = Sandbox::HiddenBy(mounts, real);
  bool real_showable = real_hidden.empty();
  for (const char* dir : kShowable) real_showable = real_showable || real_hidden == dir;
  if (!real_showable) {
    return absl::FailedPreconditionError(absl::StrCat(prefix, "; it is a link to ", real, " under ", real_hidden,
                                                      ", which never shows to ranks"));
  }
  ASSIGN_OR_RETURN(bool allowed, CanExecuteAs(uid, uid, real));
  if (!allowed) {
    return absl::FailedPreconditionError(
        absl::StrCat(prefix, ", and the tenant's uid ", uid, " cannot read and execute it there; ", WayOut(file, uid)));
  }
  return absl::StrCat("rofile:", real, ":", fs::path(file).lexically_normal().string());
}

}  // namespace

absl::StatusOr<bool> CanExecuteAs(uid_t uid, gid_t gid, const std::string& path) {
  pid_t pid = fork();
  if (pid < 0) return ErrnoStatus("fork to check access as uid " + std::to_string(uid));
  if (pid == 0) {
    // Raw system calls: this child of a threaded process may not take locks.
    if (syscall(SYS_setgroups, 0, nullptr) != 0 || syscall(SYS_setresgid, gid, gid, gid) != 0 ||
        syscall(SYS_setresuid, uid, uid, uid) != 0) {
      _exit(2);
    }
    _exit(access(path.c_str(), R_OK | X_OK) == 0 ? 0 : 1);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return ErrnoStatus("waitpid");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) == 2) {
    return absl::InternalError(absl::StrCat("cannot take uid ", uid, " to check access to ", path));
  }
  return WEXITSTATUS(status) == 0;
}

std::string ScriptInterpreter(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return "";
  struct stat st;
  char head[256];
  ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? read(fd, head, sizeof(head)) : -1;
  close(fd);
  if (n < 3 || head[0] != '#' || head[1] != '!') return "";
  std::string line(head + 2, static_cast<size_t>(n) - 2);
  line = line.substr(0, line.find('\n'));
  absl::string_view rest = absl::StripLeadingAsciiWhitespace(line);
  size_t end = rest.find_first_of(" \t\r");
  return std::string(rest.substr(0, end));
}

absl::StatusOr<std::vector<std::string>> MountsToRun(const std::vector<std::string>& mounts,
                                                     const std::string& command, uid_t uid,
                                                     const std::vector<std::string>& never_shown) {
  std::vector<std::string> added;
  if (command.empty() || command[0] != '/') return added;  // found in the cwd or on PATH, which ranks see
  ASSIGN_OR_RETURN(std::string mount, ShowFile(mounts, command, uid, never_shown));
  if (mount.empty()) return added;
  added.push_back(mount);
  std::string interpreter = ScriptInterpreter(command);
  if (!interpreter.empty() && interpreter[0] == '/') {
    absl::StatusOr<std::string> shown = ShowFile(mounts, interpreter, uid, never_shown);
    if (!shown.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the script ", command, " runs ", interpreter, ": ", shown.status().message()));
    }
    if (!shown->empty()) added.push_back(*shown);
  }
  return added;
}

}  // namespace athanor::agent
