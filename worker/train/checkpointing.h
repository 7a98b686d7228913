// Checkpointing glue between athanor-train and the checkpoint library:
//
//  - CommunicatorCommitBarrier: CommitBarrier::AllDurable as an all-reduce
//    (a min of the votes, done as a max of their negation) over the trainer's
//    Communicator on a dedicated tag, so the checkpointer's upload thread can
//    vote while the training thread runs its own collectives (distinct tags; the waiting thread drives progress).
//    Every rank must make the same sequence of AllDurable calls: the caller
//    keeps Save decisions collective (see train_main.cc).
//  - TrainerCheckpointState: the trainer's full state (parameters, optimizer
//    state, loss-scaler and data cursor in metadata) as a TrainingState of
//    replicated f32 tensors that point into the trainer (valid until its next
//    Step).
//  - RestoreTrainer: Restore() of the newest valid committed step into the
//    trainer, resharding from any source world size; every rank must call it.
//  - Crash hooks for tests (ATHANOR_TEST_CRASH_AT / ATHANOR_TEST_CRASH_RANK /
//    ATHANOR_TEST_CRASH_AFTER_MS, which main reads): the chosen rank SIGKILLs
//    itself at a checkpoint phase, or after a delay.
//
// Threading: the barrier is called by one thread at a time per rank; the
// crash store is as thread-safe as the store it wraps. Errors are statuses.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "checkpoint/commit_barrier.h"
#include "checkpoint/object_store.h"
#include "checkpoint/restore.h"
#include "checkpoint/training_state.h"
#include "collectives/communicator.h"
#include "common/rank_env.h"
#include "worker/train/trainer.h"

namespace athanor {

// Tags (ucx matches the low 20 bits) away from the trainer's 1, 2, 1000+k.
inline constexpr uint64_t kCheckpointCommitTag = 0x80001;
inline constexpr uint64_t kCheckpointRestoreTag = 0x80002;
inline constexpr uint64_t kCheckpointSkipTag = 0x80003;

class CommunicatorCommitBarrier final : public CommitBarrier {
 public:
  // `comm` may be null (a world of one); not owned.
  CommunicatorCommitBarrier(Communicator* comm, uint64_t tag, std::chrono::milliseconds timeout)
      : comm_(comm), tag_(tag), timeout_(timeout) {}
  // True iff every rank passed mine=true for the same step. Errors from the
  // communicator are returned (the caller treats them as "not durable").
  absl::StatusOr<bool> AllDurable(int64_t step, bool mine) override;

 private:
  Communicator* const comm_;
  const uint64_t tag_;
  const std::chrono::milliseconds timeout_;
};

// Max over ranks of `mine` (a 0/1 vote) on the training thread; `mine` when
// comm is null.
absl::StatusOr<bool> AnyRank(Communicator* comm, bool mine, uint64_t tag,
                             std::chrono::milliseconds timeout);

TrainingState TrainerCheckpointState(const Trainer& trainer);

// nullopt when the job has no committed step (a fresh start);
// FailedPrecondition when it has some but none can be restored.
absl::StatusOr<std::optional<RestoreResult>> RestoreTrainer(ObjectStore* store,
                                                            const std::string& job,
                                                            CommitBarrier* agreement,
                                                            Trainer* trainer);

// Deletes the COMMIT of every committed step newer than `step` (ones Restore
// rejected as corrupt), so training can write them again; called by rank 0
// once every rank has restored `step`.
absl::Status DecommitNewerSteps(ObjectStore* store, const std::string& job, int64_t step);

// Test crash points, read once from the environment by main.
enum class CrashPoint { kNone, kSnapshot, kUpload, kCommit };
struct CrashPlan {
  CrashPoint point = CrashPoint::kNone;
  int64_t step = -1;
  int rank = 0;
  int64_t after_ms = -1;  // >= 0: die this long after start
};
// The plan in `env`'s ATHANOR_TEST_CRASH_AT ("upload:4"), _RANK and
// _AFTER_MS; all unset: no crash. InvalidArgument naming the variable and its
// value for a malformed one (not an integer >= 0, an unknown point).
absl::StatusOr<CrashPlan> CrashPlanFromEnv(const EnvLookup& env);
// SIGKILLs this process when `plan` names this point, step and rank.
void MaybeCrash(const CrashPlan& plan, CrashPoint point, int64_t step, int rank);
// Starts a detached thread that SIGKILLs the process after plan.after_ms (on
// plan.rank). No-op when after_ms < 0.
void StartCrashTimer(const CrashPlan& plan, int rank);
// Wraps `store` so the process dies before closing its upload shard of
// plan.step (kUpload) or before writing that step's COMMIT (kCommit). Returns
// `store` itself when the plan has neither for this rank.
std::unique_ptr<ObjectStore> WrapForCrashes(std::unique_ptr<ObjectStore> store,
                                            const CrashPlan& plan, const std::string& job,
                                            int rank, int world_size);

}  // namespace athanor
