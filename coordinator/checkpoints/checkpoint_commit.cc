#include "coordinator/checkpoints/checkpoint_commit.h"

#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "checkpoint/catalog.h"
#include "checkpoint/layout.h"
#include "checkpoint/object_store.h"
#include "checkpoint/retention.h"
#include "checkpoint/shard_upload.h"
#include "common/logging.h"
#include "common/status.h"

namespace athanor::coord {
namespace {

// "rank-00001.json" -> 1; "rank-00001-of-00003.safetensors" -> (1, 3).
struct StepObjects {
  std::set<int> manifests;
  std::map<int, std::set<int>> shards_by_world;  // world size -> ranks
};

StepObjects Classify(const std::vector<ObjectInfo>& objects) {
  StepObjects out;
  for (const ObjectInfo& o : objects) {
    std::string name = o.key.substr(o.key.rfind('/') + 1);
    int rank = 0, world = 0;
    if (absl::StartsWith(name, "rank-") && absl::EndsWith(name, ".json") && name.size() == 15 &&
        absl::SimpleAtoi(name.substr(5, 5), &rank)) {
      out.manifests.insert(rank);
    } else if (absl::StartsWith(name, "rank-") && absl::EndsWith(name, ".safetensors") &&
               name.size() == 31 && name.substr(10, 4) == "-of-" &&
               absl::SimpleAtoi(name.substr(5, 5), &rank) &&
               absl::SimpleAtoi(name.substr(14, 5), &world)) {
      out.shards_by_world[world].insert(rank);
    }
  }
  return out;
}

// The world size whose every rank has a shard and a manifest, if any.
std::optional<int> CompleteWorld(const StepObjects& step) {
  for (const auto& [world, ranks] : step.shards_by_world) {
    if (world < 1 || static_cast<int>(ranks.size()) != world) continue;
    bool all = true;
    for (int r = 0; r < world && all; ++r) all = ranks.count(r) && step.manifests.count(r);
    if (all) return world;
  }
  return std::nullopt;
}

}  // namespace

CheckpointCommitter::CheckpointCommitter(Report report, const Clock* clock)
    : report_(std::move(report)), clock_(clock) {
  worker_ = std::thread([this] { WorkLoop(); });
}

CheckpointCommitter::~CheckpointCommitter() {
  {
    absl::MutexLock lock(&queue_mu_);
    stop_ = true;
  }
  worker_.join();
}

absl::StatusOr<std::optional<int64_t>> CheckpointCommitter::CompleteSteps(
    const std::string& job, const std::string& uri, int keep_last) {
  absl::MutexLock lock(&commit_mu_);
  if (keep_last > 0) keep_last_[job] = keep_last;
  auto kept_for_job = keep_last_.find(job);
  const int keep = kept_for_job == keep_last_.end() ? 0 : kept_for_job->second;
  ASSIGN_OR_RETURN(std::unique_ptr<ObjectStore> store, OpenObjectStore(uri));
  ASSIGN_OR_RETURN(JobScan scan, ScanJob(store.get(), job));
  const int64_t newest = scan.committed_steps.empty() ? -1 : *scan.committed_steps.rbegin();
  std::optional<int64_t> committed;
  for (const auto& [step, objects] : scan.objects_by_step) {
    if (step <= newest) continue;
    std::optional<int> world = CompleteWorld(Classify(objects));
    if (!world.has_value()) continue;
    if (before_commit_) before_commit_(job, step);
    const int64_t now = clock_->UnixSeconds();
    absl::Status s = WriteCommit(store.get(), job, step, *world, now);
    if (!s.ok()) {
      ATHANOR_LOG(WARNING) << "job " << job << ": committing step " << step << " failed: " << s;
      continue;  // an older complete step may still commit
    }
    ATHANOR_LOG(INFO) << "job " << job << ": every shard of step " << step
                      << " is durable; committed it (" << *world << " rank(s))";
    committed = step;
  }
  if (!committed.has_value()) return committed;
  report_(job, *committed, clock_->UnixSeconds());
  if (keep <= 0) return committed;
  RetentionOptions retention;
  retention.keep_last = keep;
  if (absl::StatusOr<RetentionReport> kept = ApplyRetention(store.get(), job, retention);
      !kept.ok()) {
    // The next commit's pass retries it; the commit itself stands.
    ATHANOR_LOG(WARNING) << "retention for " << job << " failed: " << kept.status();
  }
  return committed;
}

void CheckpointCommitter::CompleteStepsAsync(std::string job, std::string uri, int keep_last,
                                             Done done) {
  absl::MutexLock lock(&queue_mu_);
  queue_.push_back(Task{std::move(job), std::move(uri), keep_last, std::move(done)});
}

void CheckpointCommitter::WorkLoop() {
  for (;;) {
    Task task;
    {
      absl::MutexLock lock(&queue_mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_mu_) {
        return stop_ || !queue_.empty();
      };
      queue_mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task.done(CompleteSteps(task.job, task.uri, task.keep_last));
  }
}

}  // namespace athanor::coord
