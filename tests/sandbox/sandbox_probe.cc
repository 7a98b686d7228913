// sandbox_probe: escape attempts run as a rank inside the sandbox by
// sandbox_escape_test. Each argument is one attempt; each prints one line,
// "<attempt>: <result>", where the result is "ok" or the errno name
// (strerrorname_np) of the refusal, so the test can expect exact values.
//
//   open:PATH           open PATH read-only
//   list:DIR            the names in DIR, sorted, joined by ',' ("(empty)" for none)
//   write:PATH          create PATH and write to it
//   kill:PID            kill(PID, SIGKILL)
//   ptrace:PID          ptrace(PTRACE_ATTACH, PID)
//   procs               the processes it can see: "<pid>=<comm>" for each
//   alloc:MB            allocate and touch MB MiB, 16 MiB at a time (prints progress)
//   forkbomb:N          fork up to N sleeping children; prints how many forks succeeded
//                       before one failed, and its errno; then ends them
//   store:HOST:PORT     connect to a TCP store with this rank's secret and set "owner"
//   store-nosecret:HOST:PORT   the same without presenting a secret
//   serve:PORT          (not an attempt) serve a TCP store holding owner=<job id>, forever
#include <fcntl.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives/bootstrap/tcp_store.h"
#include "common/rank_env.h"

namespace {

std::string Result(bool ok) { return ok ? "ok" : strerrorname_np(errno); }

// The names in folder `dir`, sorted and joined by ','.
std::string List(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return Result(false);
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ",") + n;
  return out.empty() ? "(empty)" : out;
}

std::string Procs() {
  std::vector<int> pids;
  DIR* d = opendir("/proc");
  if (d == nullptr) return Result(false);
  while (dirent* e = readdir(d)) {
    int pid = atoi(e->d_name);
    if (pid > 0) pids.push_back(pid);
  }
  closedir(d);
  std::sort(pids.begin(), pids.end());
  std::string out;
  for (int pid : pids) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
    std::string comm;
    std::getline(in, comm);
    absl::StrAppend(&out, out.empty() ? "" : " ", pid, "=", comm);
  }
  return out;
}

std::string Alloc(long mb) {
  std::vector<char*> blocks;
  for (long done = 0; done < mb; done += 16) {
    char* p = static_cast<char*>(malloc(16 << 20));
    if (p == nullptr) return absl::StrCat("malloc failed after ", done, " MiB");
    memset(p, 1, 16 << 20);
    blocks.push_back(p);
    std::cout << "allocated " << done + 16 << " MiB" << std::endl;
  }
  return "ok";  // not reached under a lower limit: the OOM killer ends the rank
}

std::string ForkBomb(int n) {
  std::vector<pid_t> children;
  std::string out;
  for (int i = 0; i < n; ++i) {
    pid_t p = fork();
    if (p == 0) {
      pause();
      _exit(0);
    }
    if (p < 0) {
      out = absl::StrCat("failed after ", i, " forks: ", strerrorname_np(errno));
      break;
    }
    children.push_back(p);
  }
  if (out.empty()) out = absl::StrCat("all ", n, " forks succeeded");
  for (pid_t c : children) kill(c, SIGKILL);
  for (pid_t c : children) waitpid(c, nullptr, 0);
  return out;
}

// The job's rendezvous secret, as the rank's environment gives it (none when
// it is missing or malformed).
std::string JobRendezvousSecret() {
  return athanor::ParseRendezvousEnv(athanor::ProcessEnv()).value_or(athanor::RendezvousEnv{}).secret;
}

std::string Store(const std::string& target, bool with_secret) {
  size_t colon = target.rfind(':');
  std::string host = target.substr(0, colon);
  int port = atoi(target.substr(colon + 1).c_str());
  auto c = athanor::TcpStoreClient::Connect(host, port, std::chrono::seconds(5),
                                            with_secret ? JobRendezvousSecret() : "");
  if (!c.ok()) return absl::StrCat("connect: ", absl::StatusCodeToString(c.status().code()));
  absl::Status s = (*c)->Set("owner", "intruder");
  return s.ok() ? "ok" : absl::StrCat("set: ", absl::StatusCodeToString(s.code()));
}

int Serve(int port) {
  auto server = athanor::TcpStoreServer::Start("127.0.0.1", port, {.secret = JobRendezvousSecret()});
  if (!server.ok()) {
    std::cout << "serve: " << server.status() << std::endl;
    return 1;
  }
  auto c = athanor::TcpStoreClient::Connect("127.0.0.1", port, std::chrono::seconds(5), JobRendezvousSecret());
  const char* job = getenv("ATHANOR_JOB_ID");
  if (!c.ok() || !(*c)->Set("owner", job != nullptr ? job : "?").ok()) return 1;
  std::cout << "serving" << std::endl;
  for (;;) pause();
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string kind = a.substr(0, a.find(':'));
    std::string arg = a.find(':') == std::string::npos ? "" : a.substr(a.find(':') + 1);
    std::string r;
    errno = 0;
    if (kind == "open") {
      int fd = open(arg.c_str(), O_RDONLY | O_CLOEXEC);
      r = Result(fd >= 0);
      if (fd >= 0) close(fd);
    } else if (kind == "list") {
      r = List(arg);
    } else if (kind == "write") {
      int fd = open(arg.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      r = Result(fd >= 0 && write(fd, "x", 1) == 1);
      if (fd >= 0) close(fd);
    } else if (kind == "kill") {
      r = Result(kill(atoi(arg.c_str()), SIGKILL) == 0);
    } else if (kind == "ptrace") {
      r = Result(ptrace(PTRACE_ATTACH, atoi(arg.c_str()), nullptr, nullptr) == 0);
    } else if (kind == "procs") {
      r = Procs();
    } else if (kind == "alloc") {
      r = Alloc(atol(arg.c_str()));
    } else if (kind == "forkbomb") {
      r = ForkBomb(atoi(arg.c_str()));
    } else if (kind == "store") {
      r = Store(arg, true);
    } else if (kind == "store-nosecret") {
      r = Store(arg, false);
    } else if (kind == "serve") {
      return Serve(atoi(arg.c_str()));
    } else {
      std::cerr << "sandbox_probe: unknown attempt " << a << "\n";
      return 2;
    }
    std::cout << a << ": " << r << std::endl;
  }
  return 0;
}
