// ProgressPage: a rank's progress, published through one shared-memory page
// that its node agent reads (docs/operations.md, "Hangs and stragglers").
//
// The rank maps a small file named by $ATHANOR_PROGRESS_FILE (the agent sets
// it and the rank's main passes it in; under mpirun or athanor-run it is
// absent and nothing is published) and
// updates it with plain atomic stores, no system call: the step it finished,
// its compute time per step (collective waits excluded; athanor-train smooths it
// over about 20 steps), how many collectives
// it has issued, whether it is blocked in one (and which), and when it last
// wrote (CLOCK_REALTIME through the vDSO).
//
// Consistency: a sequence lock. The writer makes `version` odd, stores the
// fields, then makes it even; a reader copies the fields between two loads of
// an even, unchanged `version`, and retries otherwise.
//
// Threading: one writer object per page; its methods may be called from
// several threads of the rank (the collectives' waits and the training loop):
// writers take turns on a process-local spin flag (held for a few stores).
// Readers are other processes; ReadProgressPage is thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace athanor {

// The collective a rank is blocked in (ProgressSnapshot::op).
enum class ProgressOp : int32_t {
  kNone = 0,
  kAllReduce = 1,
  kReduceScatter = 2,
  kAllGather = 3,
  kBroadcast = 4,
  kBarrier = 5,
  // Not a collective: the training thread waits for its checkpoint hand-off
  // (an earlier save still in flight, or the staging budget). Written with
  // waiting_seq 0; a rank in it may be waiting on a peer's commit vote.
  kCheckpointSave = 6,
  kLast = kCheckpointSave,
};
const char* ProgressOpName(ProgressOp op);  // "all-reduce", ...; "" for kNone

// One consistent reading of a page.
struct ProgressSnapshot {
  int64_t step = -1;               // steps finished; -1: none yet
  double step_compute_ms = 0;      // per step (smoothed), collective waits excluded
  double step_ms = 0;              // of the last step, wall time
  uint64_t collective_seq = 0;     // collectives issued so far
  bool waiting = false;            // blocked in a collective
  uint64_t waiting_seq = 0;        // which one (1-based issue number)
  ProgressOp op = ProgressOp::kNone;
  int64_t update_unix_ms = 0;      // last write, wall clock
};

// The shared layout (cache-line sized; version 1).
struct ProgressPageLayout {
  std::atomic<uint32_t> magic;
  std::atomic<uint32_t> layout_version;
  std::atomic<uint64_t> version;  // sequence lock: odd while being written
  std::atomic<int64_t> step;
  std::atomic<int64_t> step_compute_us;
  std::atomic<int64_t> step_us;
  std::atomic<uint64_t> collective_seq;
  std::atomic<uint64_t> waiting_seq;  // 0: not waiting
  std::atomic<int32_t> op;
  std::atomic<int32_t> reserved;
  std::atomic<int64_t> update_unix_ms;
};
inline constexpr uint32_t kProgressMagic = 0x41505047;  // "APPG"
static_assert(std::atomic<uint64_t>::is_always_lock_free, "progress page needs lock-free atomics");

class ProgressWriter {
 public:
  // Creates (or truncates) `path` with mode 0600 and maps it. InvalidArgument
  // for an empty or relative path; the errno text otherwise.
  static absl::StatusOr<std::unique_ptr<ProgressWriter>> Open(const std::string& path);
  // The writer of the page the agent named (main reads $ATHANOR_PROGRESS_FILE):
  // null when `path` is empty (no agent) or the page cannot be created
  // (logged once: progress is best effort, never fatal); InvalidArgument when
  // `path` is not absolute, a value no agent sets.
  static absl::StatusOr<std::unique_ptr<ProgressWriter>> OpenIfNamed(const std::string& path);
  ~ProgressWriter();

  void StepDone(int64_t step, double compute_ms, double step_ms);
  // A collective was issued; returns its issue number.
  uint64_t CollectiveIssued();
  void WaitBegin(uint64_t seq, ProgressOp op);
  void WaitEnd();
  // The training thread is blocked in something other than a collective
  // (op, with waiting_seq 0), until BlockedEnd. Not counted as collective wait.
  void BlockedBegin(ProgressOp op);
  void BlockedEnd();
  // Time spent between WaitBegin and WaitEnd since the last call (ms): the
  // training loop subtracts it from a step's wall time to get its compute.
  double TakeWaitMs() { return wait_ns_.exchange(0, std::memory_order_relaxed) / 1e6; }

 private:
  explicit ProgressWriter(ProgressPageLayout* page) : page_(page) {}
  void Begin();
  void End();
  ProgressPageLayout* const page_;
  std::atomic_flag busy_ = ATOMIC_FLAG_INIT;
  std::atomic<int64_t> wait_start_ns_{0};  // process-local, not on the page
  std::atomic<int64_t> wait_ns_{0};
};

// Marks `writer`'s training thread blocked in `op` for the scope's life; a
// null writer (no page) is allowed and does nothing.
class ProgressBlockedScope {
 public:
  ProgressBlockedScope(ProgressWriter* writer, ProgressOp op) : writer_(writer) {
    if (writer_ != nullptr) writer_->BlockedBegin(op);
  }
  ~ProgressBlockedScope() {
    if (writer_ != nullptr) writer_->BlockedEnd();
  }
  ProgressBlockedScope(const ProgressBlockedScope&) = delete;
  ProgressBlockedScope& operator=(const ProgressBlockedScope&) = delete;

 private:
  ProgressWriter* const writer_;
};

// Reads the page at `path`: NotFound when it does not exist (yet), DataLoss
// when it is not a progress page, Unavailable when no consistent copy was
// seen within a few retries (a writer stopped mid-update).
absl::StatusOr<ProgressSnapshot> ReadProgressPage(const std::string& path);

// Decodes a mapped page (exposed for tests that share one in memory).
absl::StatusOr<ProgressSnapshot> ReadProgressLayout(const ProgressPageLayout& page);

}  // namespace athanor
