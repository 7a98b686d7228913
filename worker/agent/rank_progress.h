// What the agent learns of a running rank's progress, for its heartbeats, and
// the thread stacks it captures when the coordinator declares a hang
// (docs/operations.md, "Hangs and stragglers").
//
// Each rank the agent starts is named a progress page by
// $ATHANOR_PROGRESS_FILE (common/progress_page.h). In a sandbox the page is
// /dev/shm/athanor-progress-<rank> inside the attempt's box (its private
// /dev/shm, which only that job attempt's ranks and the agent see); without
// one it sits beside the rank's log, WORK_DIR/jobs/<job>/attempt-<a>/.
//
// Pure functions over /proc and the page; thread-safe. CaptureStacks runs a
// helper through the supervisor's foreign-process hooks so its reaper leaves
// it alone.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/clock.h"
#include "common/progress_page.h"

namespace athanor::rpc {
class RankReport;
}

namespace athanor::agent {

class RankSupervisor;

struct RankProgress {
  bool seen = false;  // `page` holds a reading
  ProgressSnapshot page;
  bool stopped = false;  // some process of the rank is stopped (state T or t)
};

// Where a rank's page is: `in_rank` for its environment, `on_host` for the
// agent. `box_shm_dir` is the sandbox box's /dev/shm folder, empty when the
// rank runs unsandboxed (then the page sits beside `log_path`).
struct ProgressPaths {
  std::string in_rank;
  std::string on_host;
};
ProgressPaths PlanProgressPage(const std::string& log_path, const std::string& box_shm_dir,
                               int32_t rank);
// The page's path inside a sandbox (its box's /dev/shm).
std::string SandboxedProgressPage(int32_t rank);

// Reads the page (a missing or bad page leaves `seen` false) and whether any
// process of the tree rooted at `leader` is stopped.
RankProgress ReadRankProgress(const std::string& page_path, pid_t leader,
                              const std::string& proc_root = "/proc");

// `leader` and its descendants, parents first (from /proc/<pid>/task/*/children).
std::vector<pid_t> ProcessTree(pid_t leader, const std::string& proc_root = "/proc");

// How much one hung rank's stack capture may take (stack_capturer.h).
struct StackCaptureBounds {
  size_t max_processes = 16;          // of the rank's process tree, parents first
  Duration per_process = Seconds(3);  // each debugger run
  Duration per_rank = Seconds(10);    // all of them together
};

// Thread stacks of the processes in the tree of `leader`, by eu-stack (or gdb
// when eu-stack is missing), within `bounds`; what could not be captured
// (processes past the bound, runs cut short) is said in the text.
std::string CaptureStacks(RankSupervisor* supervisor, pid_t leader, const StackCaptureBounds& bounds);

void ProgressToProto(const RankProgress& progress, rpc::RankReport* out);

}  // namespace athanor::agent
