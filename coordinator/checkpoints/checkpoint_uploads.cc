#include "coordinator/checkpoints/checkpoint_uploads.h"

namespace athanor::coord {
namespace {

// Steps kept per job: a rank hands off at most one step ahead of its uploads,
// so a handful covers every rank; the oldest go first.
constexpr size_t kMaxStepsPerJob = 16;

}  // namespace

void CheckpointUploads::HandedOff(const std::string& job, int32_t attempt, int64_t step,
                                  int32_t rank, int32_t world_size, TimePoint now) {
  Job& j = jobs_[job];
  auto [it, added] = j.steps.try_emplace(step);
  Step& s = it->second;
  if (!added && attempt < s.attempt) return;
  if (added || attempt > s.attempt) s = Step{attempt, world_size, now, {}, false, false};
  s.ranks.insert(rank);
  while (j.steps.size() > kMaxStepsPerJob) j.steps.erase(j.steps.begin());
}

void CheckpointUploads::Failed(const std::string& job, int32_t attempt, int64_t step) {
  auto j = jobs_.find(job);
  if (j == jobs_.end()) return;
  auto s = j->second.steps.find(step);
  if (s == j->second.steps.end() || attempt < s->second.attempt) return;
  s->second.failed = true;
}

std::optional<CheckpointUploads::Wait> CheckpointUploads::MustWait(const std::string& job,
                                                                   int64_t committed_step,
                                                                   TimePoint now) {
  auto j = jobs_.find(job);
  if (j == jobs_.end()) return std::nullopt;
  auto& steps = j->second.steps;
  steps.erase(steps.begin(), steps.upper_bound(committed_step));
  std::optional<Wait> wait;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    Step& s = it->second;
    if (s.failed || s.gave_up || static_cast<int32_t>(s.ranks.size()) < s.world_size) continue;
    if (now - s.first >= max_wait_) {
      s.gave_up = true;
      j->second.gave_up = it->first;
      continue;
    }
    wait = Wait{it->first, s.first + max_wait_, static_cast<int32_t>(s.ranks.size())};
    break;
  }
  if (steps.empty() && !j->second.gave_up.has_value()) jobs_.erase(j);
  return wait;
}

void CheckpointUploads::Committed(const std::string& job, int64_t step) {
  auto j = jobs_.find(job);
  if (j == jobs_.end()) return;
  auto& steps = j->second.steps;
  steps.erase(steps.begin(), steps.upper_bound(step));
  if (steps.empty() && !j->second.gave_up.has_value()) jobs_.erase(j);
}

std::optional<int64_t> CheckpointUploads::TakeGaveUp(const std::string& job) {
  auto j = jobs_.find(job);
  if (j == jobs_.end()) return std::nullopt;
  std::optional<int64_t> out = j->second.gave_up;
  j->second.gave_up.reset();
  return out;
}

std::set<std::string> CheckpointUploads::Jobs() const {
  std::set<std::string> out;
  for (const auto& [job, j] : jobs_) out.insert(job);
  return out;
}

}  // namespace athanor::coord
