#include "worker/train/checkpointing.h"

#include <signal.h>
#include <unistd.h>

#include <map>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "checkpoint/catalog.h"
#include "checkpoint/forwarding_object_store.h"
#include "checkpoint/layout.h"
#include "common/logging.h"
#include "common/status.h"

namespace athanor {
namespace {

absl::Status AllReduceF32(Communicator* comm, float* values, size_t n, ReduceOp op, uint64_t tag,
                          std::chrono::milliseconds timeout) {
  CollectiveOptions opts;
  opts.tag = tag;
  opts.timeout = timeout;
  std::unique_ptr<Work> work = comm->AllReduceAsync(values, values, n, DataType::kF32, op, opts);
  return work->Wait(timeout);
}

[[noreturn]] void Die(const std::string& why) {
  std::string line = absl::StrCat("athanor-train: test crash: ", why, "\n");
  (void)!::write(STDERR_FILENO, line.data(), line.size());
  ::kill(::getpid(), SIGKILL);
  ::_exit(137);
}

class CrashOnCloseWritable final : public WritableObject {
 public:
  CrashOnCloseWritable(std::unique_ptr<WritableObject> inner, std::string what)
      : inner_(std::move(inner)), what_(std::move(what)) {}
  absl::Status Append(absl::string_view data) override { return inner_->Append(data); }
  absl::Status Close() override { Die(what_); }
  void Abort() override { inner_->Abort(); }

 private:
  std::unique_ptr<WritableObject> inner_;
  const std::string what_;
};

// Delegates everything; intercepts the writes the crash plan names.
class CrashingStore final : public ForwardingObjectStore {
 public:
  CrashingStore(std::unique_ptr<ObjectStore> inner, std::string shard_key, std::string commit_key)
      : ForwardingObjectStore(std::move(inner)),
        shard_key_(std::move(shard_key)),
        commit_key_(std::move(commit_key)) {}
  absl::StatusOr<std::unique_ptr<WritableObject>> OpenWrite(const std::string& key,
                                                            PutMode mode) override {
    if (key == commit_key_) Die(absl::StrCat("before writing ", key));
    ASSIGN_OR_RETURN(std::unique_ptr<WritableObject> w, inner()->OpenWrite(key, mode));
    if (key != shard_key_) return w;
    return std::unique_ptr<WritableObject>(
        new CrashOnCloseWritable(std::move(w), absl::StrCat("uploading ", key)));
  }
  absl::Status Put(const std::string& key, absl::string_view data, PutMode mode) override {
    if (key == commit_key_ || key == shard_key_) return ObjectStore::Put(key, data, mode);
    return inner()->Put(key, data, mode);
  }

 private:
  const std::string shard_key_, commit_key_;
};

}  // namespace

absl::StatusOr<bool> CommunicatorCommitBarrier::AllDurable(int64_t step, bool mine) {
  if (comm_ == nullptr || comm_->world_size() == 1) return mine;
  // max over {-mine, s, -s}: all durable iff max(-mine) == -1 (the min of
  // the votes is 1), and every rank voted on the same step iff
  // max(s) == -max(-s). s fits a float exactly.
  const float s = static_cast<float>(step % (1 << 22));
  float v[3] = {mine ? -1.0f : 0.0f, s, -s};
  RETURN_IF_ERROR(AllReduceF32(comm_, v, 3, ReduceOp::kMax, tag_, timeout_));
  if (v[1] != -v[2]) {
    return absl::FailedPreconditionError(
        absl::StrCat("ranks voted on different checkpoint steps (this rank: ", step, ")"));
  }
  return v[0] == -1.0f;
}

absl::StatusOr<bool> AnyRank(Communicator* comm, bool mine, uint64_t tag,
                             std::chrono::milliseconds timeout) {
  if (comm == nullptr || comm->world_size() == 1) return mine;
  float v = mine ? 1.0f : 0.0f;
  RETURN_IF_ERROR(AllReduceF32(comm, &v, 1, ReduceOp::kMax, tag, timeout));
  return v != 0.0f;
}

TrainingState TrainerCheckpointState(const Trainer& trainer) {
  TrainingState state;
  for (const NamedTensor& t : trainer.StateTensors()) {
    TensorRef ref;
    ref.name = t.name;
    ref.dtype = TensorDType::kF32;
    ref.shape = t.shape;
    ref.data = const_cast<float*>(t.data);  // only read by Save
    ref.bytes = t.size * sizeof(float);
    state.tensors.push_back(std::move(ref));
  }
  state.metadata = trainer.StateMetadata();
  // Data sampling is a pure function of (seed, step): that pair is the RNG state.
  state.metadata["rng_state"] =
      absl::StrCat("seed=", state.metadata["seed"], ";step=", state.metadata["step"]);
  return state;
}

absl::StatusOr<std::optional<RestoreResult>> RestoreTrainer(ObjectStore* store,
                                                            const std::string& job,
                                                            CommitBarrier* agreement,
                                                            Trainer* trainer) {
  std::map<std::string, std::vector<float>> tensors;
  std::vector<TensorRef> targets;
  for (const NamedTensor& t : trainer->StateTensors()) tensors[t.name].resize(t.size);
  for (const NamedTensor& t : trainer->StateTensors()) {
    TensorRef ref;
    ref.name = t.name;
    ref.shape = t.shape;
    ref.data = tensors[t.name].data();
    ref.bytes = t.size * sizeof(float);
    targets.push_back(std::move(ref));
  }
  ASSIGN_OR_RETURN(JobScan scan, ScanJob(store, job));
  if (scan.committed_steps.empty()) return std::nullopt;
  RestoreOptions options;
  options.job = job;
  options.rank = trainer->rank();
  options.world_size = trainer->world_size();
  options.agreement = agreement;
  absl::StatusOr<RestoreResult> result = Restore(store, options, targets);
  if (absl::IsNotFound(result.status())) {
    // Starting over would later collide with those COMMITs: an operator decides.
    return absl::FailedPreconditionError(absl::StrCat(
        "job '", job, "' has ", scan.committed_steps.size(),
        " committed checkpoint(s) but none could be restored (", result.status().message(),
        "); delete them to start over"));
  }
  RETURN_IF_ERROR(result.status());
  RETURN_IF_ERROR(Annotate(trainer->LoadState(tensors, result->metadata),
                           absl::StrCat("checkpoint step ", result->step)));
  return std::optional<RestoreResult>(std::move(*result));
}

absl::Status DecommitNewerSteps(ObjectStore* store, const std::string& job, int64_t step) {
  ASSIGN_OR_RETURN(JobScan scan, ScanJob(store, job));
  for (int64_t newer : scan.committed_steps) {
    if (newer <= step) continue;
    const std::string key = ckpt_layout::CommitKey(job, newer);
    ATHANOR_LOG(WARNING) << "step " << newer << " of " << job
                         << " was rejected on restore; deleting " << key
                         << " so the step can be written again";
    RETURN_IF_ERROR(store->Delete(key));
    // Its manifests too: the coordinator commits any step whose manifests are
    // all there (coordinator/checkpoints/checkpoint_commit.h), and this one was bad.
    for (const ObjectInfo& o : scan.objects_by_step[newer]) {
      if (absl::EndsWith(o.key, ".json")) RETURN_IF_ERROR(store->Delete(o.key));
    }
  }
  return absl::OkStatus();
}

namespace {

// `name`'s value in `env` as an integer >= 0 in *out; left alone when unset
// or empty. InvalidArgument naming the variable and its value otherwise.
template <typename Int>
absl::Status ReadNonNegative(const EnvLookup& env, const char* name, Int* out) {
  const std::string v = env(name).value_or("");
  if (v.empty()) return absl::OkStatus();
  Int value = 0;
  if (!absl::SimpleAtoi(v, &value) || value < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " must be an integer >= 0, not '", v, "'"));
  }
  *out = value;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CrashPlan> CrashPlanFromEnv(const EnvLookup& env) {
  CrashPlan plan;
  RETURN_IF_ERROR(ReadNonNegative(env, "ATHANOR_TEST_CRASH_RANK", &plan.rank));
  RETURN_IF_ERROR(ReadNonNegative(env, "ATHANOR_TEST_CRASH_AFTER_MS", &plan.after_ms));
  const std::string at = env("ATHANOR_TEST_CRASH_AT").value_or("");
  if (at.empty()) return plan;
  std::vector<std::string> parts = absl::StrSplit(at, ':');
  static const std::map<std::string, CrashPoint> kPoints = {
      {"snapshot", CrashPoint::kSnapshot},
      {"upload", CrashPoint::kUpload},
      {"commit", CrashPoint::kCommit}};
  if (parts.size() != 2 || kPoints.count(parts[0]) == 0 ||
      !absl::SimpleAtoi(parts[1], &plan.step) || plan.step < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ATHANOR_TEST_CRASH_AT must be snapshot|upload|commit:STEP (STEP >= 0), not '", at, "'"));
  }
  plan.point = kPoints.at(parts[0]);
  return plan;
}

void MaybeCrash(const CrashPlan& plan, CrashPoint point, int64_t step, int rank) {
  if (plan.point == point && plan.step == step && plan.rank == rank) {
    Die(absl::StrCat("at the snapshot of step ", step));
  }
}

void StartCrashTimer(const CrashPlan& plan, int rank) {
  if (plan.after_ms < 0 || plan.rank != rank) return;
  const int64_t ms = plan.after_ms;
  std::thread([ms] {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));  // the crash moment itself
    Die(absl::StrCat("after ", ms, " ms"));
  }).detach();
}

std::unique_ptr<ObjectStore> WrapForCrashes(std::unique_ptr<ObjectStore> store,
                                            const CrashPlan& plan, const std::string& job,
                                            int rank, int world_size) {
  if (plan.rank != rank) return store;
  std::string shard, commit;
  if (plan.point == CrashPoint::kUpload) {
    shard = ckpt_layout::ShardKey(job, plan.step, rank, world_size);
  } else if (plan.point == CrashPoint::kCommit) {
    commit = ckpt_layout::CommitKey(job, plan.step);
  } else {
    return store;
  }
  return std::make_unique<CrashingStore>(std::move(store), shard, commit);
}

}  // namespace athanor
