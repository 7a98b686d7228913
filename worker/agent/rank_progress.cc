#include "worker/agent/rank_progress.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"
#include "proto/athanor.pb.h"
#include "worker/agent/rank_supervisor.h"

namespace athanor::agent {
namespace {

// The state letter of /proc/<pid>/stat (after the parenthesised name), or 0.
char ProcessState(const std::string& proc_root, pid_t pid) {
  std::ifstream in(absl::StrCat(proc_root, "/", pid, "/stat"));
  std::string line;
  if (!std::getline(in, line)) return 0;
  size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return 0;
  return line[close + 2];
}

bool OnPath(const std::string& name) {
  const char* path = getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':')) {
    if (!dir.empty() && access(absl::StrCat(dir, "/", name).c_str(), X_OK) == 0) return true;
  }
  return false;
}

constexpr size_t kMaxTree = 256;  // a rank with more processes is cut short here

}  // namespace

std::string SandboxedProgressPage(int32_t rank) {
  return absl::StrCat("/dev/shm/athanor-progress-", rank);
}

ProgressPaths PlanProgressPage(const std::string& log_path, const std::string& box_shm_dir,
                               int32_t rank) {
  ProgressPaths p;
  if (!box_shm_dir.empty()) {
    p.in_rank = SandboxedProgressPage(rank);
    p.on_host = absl::StrCat(box_shm_dir, "/athanor-progress-", rank);
  } else {
    std::string base = log_path.size() > 4 ? log_path.substr(0, log_path.size() - 4) : log_path;
    p.in_rank = p.on_host = base + ".progress";
  }
  return p;
}

std::vector<pid_t> ProcessTree(pid_t leader, const std::string& proc_root) {
  std::vector<pid_t> out = {leader};
  for (size_t i = 0; i < out.size() && out.size() < kMaxTree; ++i) {
    std::error_code ec;
    std::filesystem::directory_iterator tasks(absl::StrCat(proc_root, "/", out[i], "/task"), ec);
    if (ec) continue;
    for (const auto& task : tasks) {
      std::ifstream in(task.path() / "children");
      pid_t child;
      while (in >> child && out.size() < kMaxTree) out.push_back(child);
    }
  }
  return out;
}

RankProgress ReadRankProgress(const std::string& page_path, pid_t leader,
                              const std::string& proc_root) {
  RankProgress p;
  if (!page_path.empty()) {
    absl::StatusOr<ProgressSnapshot> s = ReadProgressPage(page_path);
    if (s.ok()) {
      p.seen = true;
      p.page = *s;
    }
  }
  if (leader > 0) {
    for (pid_t pid : ProcessTree(leader, proc_root)) {
      char state = ProcessState(proc_root, pid);
      if (state == 'T' || state == 't') p.stopped = true;
    }
  }
  return p;
}

std::string CaptureStacks(RankSupervisor* supervisor, pid_t leader, const StackCaptureBounds& bounds) {
  const bool eu_stack = OnPath("eu-stack");
  if (!eu_stack && !OnPath("gdb")) {
    return "no stack capture tool (install elfutils for eu-stack, or gdb)\n";
  }
  std::string out;
  const auto start = std::chrono::steady_clock::now();
  const auto rank_limit = std::chrono::duration_cast<std::chrono::milliseconds>(bounds.per_rank);
  char tmpl[] = "/tmp/athanor-stacks-XXXXXX";
  int fd = mkstemp(tmpl);
  if (fd < 0) return "cannot capture stacks: no temporary file\n";
  close(fd);
  std::vector<pid_t> tree = ProcessTree(leader);
  size_t done = 0;
  for (pid_t pid : tree) {
    auto left = rank_limit - std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::steady_clock::now() - start);
    if (done == bounds.max_processes || left <= std::chrono::milliseconds(0)) {
      absl::StrAppend(&out, "(", tree.size() - done, " more process(es) not captured: at most ",
                      bounds.max_processes, " processes and ", rank_limit.count(), " ms a rank)\n");
      break;
    }
    ++done;
    const auto limit =
        std::min(left, std::chrono::duration_cast<std::chrono::milliseconds>(bounds.per_process));
    SubprocessOptions opts;
    if (eu_stack) {
      opts.argv = {"eu-stack", "-p", std::to_string(pid)};
    } else {
      opts.argv = {"gdb", "-nx", "-batch", "-p", std::to_string(pid), "-ex",
                   "thread apply all bt"};
    }
    std::filesystem::resize_file(tmpl, 0);
    opts.stdout_path = tmpl;
    opts.stderr_path = "=stdout";
    absl::StrAppend(&out, "--- pid ", pid, " (", opts.argv[0], ")\n");
    absl::StatusOr<std::unique_ptr<Subprocess>> p = supervisor->StartForeign(opts);
    if (!p.ok()) {
      absl::StrAppend(&out, "cannot run ", opts.argv[0], ": ", p.status().message(), "\n");
      continue;
    }
    std::optional<ExitInfo> e = (*p)->WaitFor(limit);
    if (!e.has_value()) {
      (*p)->Signal(SIGKILL).IgnoreError();  // a debugger past its bound: its partial output is kept
      (*p)->Wait();
      absl::StrAppend(&out, "(cut short after ", limit.count(), " ms)\n");
    }
    supervisor->EndForeign((*p)->pid());
    std::ifstream in(tmpl);
    std::stringstream text;
    text << in.rdbuf();
    std::string s = text.str();
    if (s.size() > (256u << 10)) s = s.substr(0, 256u << 10) + "\n(truncated)\n";
    out += s;
  }
  unlink(tmpl);
  return out;
}

void ProgressToProto(const RankProgress& progress, rpc::RankReport* out) {
  if (!progress.seen && !progress.stopped) return;
  rpc::RankProgress* p = out->mutable_progress();
  p->set_seen(progress.seen);
  p->set_stopped(progress.stopped);
  if (!progress.seen) return;
  p->set_step(progress.page.step);
  p->set_step_compute_ms(progress.page.step_compute_ms);
  p->set_step_ms(progress.page.step_ms);
  p->set_collective_seq(progress.page.collective_seq);
  p->set_waiting_seq(progress.page.waiting_seq);
  p->set_waiting_op(ProgressOpName(progress.page.op));
  p->set_update_unix_ms(progress.page.update_unix_ms);
}

}  // namespace athanor::agent
