#include "coordinator/core/long_polls.h"

namespace athanor::coord {

LongPolls::LongPolls(std::function<void(std::vector<Poll>)> expire) : expire_(std::move(expire)) {
  timer_ = std::thread([this] { TimerLoop(); });
}

LongPolls::~LongPolls() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  timer_.join();
}

LongPolls::Id LongPolls::NextId() {
  absl::MutexLock lock(&mu_);
  return next_id_++;
}

void LongPolls::Park(Poll poll) {
  absl::MutexLock lock(&mu_);
  const Id id = poll.id;
  by_node_.emplace(poll.node, id);
  by_deadline_.emplace(poll.deadline, id);
  polls_[id] = std::move(poll);
}

void LongPolls::EraseIndexes(const Poll& poll) {
  auto [nb, ne] = by_node_.equal_range(poll.node);
  for (auto it = nb; it != ne; ++it) {
    if (it->second == poll.id) {
      by_node_.erase(it);
      break;
    }
  }
  auto [db, de] = by_deadline_.equal_range(poll.deadline);
  for (auto it = db; it != de; ++it) {
    if (it->second == poll.id) {
      by_deadline_.erase(it);
      break;
    }
  }
}

LongPolls::Poll LongPolls::TakeLocked(Id id) {
  auto p = polls_.find(id);
  EraseIndexes(p->second);
  Poll poll = std::move(p->second);
  polls_.erase(p);
  return poll;
}

std::vector<LongPolls::Poll> LongPolls::TakeNodes(const std::set<std::string>& nodes) {
  std::vector<Poll> out;
  absl::MutexLock lock(&mu_);
  for (const std::string& node : nodes) {
    std::vector<Id> ids;
    auto [b, e] = by_node_.equal_range(node);
    for (auto it = b; it != e; ++it) ids.push_back(it->second);
    for (Id id : ids) out.push_back(TakeLocked(id));
  }
  return out;
}

std::vector<LongPolls::Poll> LongPolls::Take(Id id) {
  std::vector<Poll> out;
  absl::MutexLock lock(&mu_);
  if (polls_.count(id) == 0) return out;
  out.push_back(TakeLocked(id));
  return out;
}

std::vector<LongPolls::Poll> LongPolls::TakeAll() {
  std::vector<Poll> out;
  absl::MutexLock lock(&mu_);
  for (auto& [id, poll] : polls_) out.push_back(std::move(poll));
  polls_.clear();
  by_node_.clear();
  by_deadline_.clear();
  return out;
}

size_t LongPolls::size() const {
  absl::MutexLock lock(&mu_);
  return polls_.size();
}

bool LongPolls::AwaitParked(size_t n, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return polls_.size() >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
}

void LongPolls::TimerLoop() {
  for (;;) {
    std::vector<Poll> expired;
    {
      absl::MutexLock lock(&mu_);
      // Wakes at the earliest deadline (a new earlier one is at most one
      // interval away: agents all ask for the same wait).
      absl::Time until = by_deadline_.empty() ? absl::Now() + absl::Milliseconds(50)
                                              : by_deadline_.begin()->first;
      auto stopped = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
      mu_.AwaitWithDeadline(absl::Condition(&stopped), std::min(until, absl::Now() + absl::Milliseconds(50)));
      if (stop_) return;
      const absl::Time now = absl::Now();
      while (!by_deadline_.empty() && by_deadline_.begin()->first <= now) {
        expired.push_back(TakeLocked(by_deadline_.begin()->second));
      }
    }
    if (!expired.empty()) expire_(std::move(expired));
  }
}

}  // namespace athanor::coord
