// LongPolls: agents' heartbeats parked until their node's desired set changes
// or their wait ends, held without a thread each.
//
// A parked poll is a record and a callback: gRPC's callback API leaves the
// call open until the callback finishes it. Polls are found by node (when a
// commit makes a node's new desired set durable), by id (when the agent
// cancels the call) and by deadline: one timer thread hands expired polls to
// `expire`.
//
// Thread-safe. `expire` runs on the timer thread with no lock of this class
// held. Whoever takes a poll out (Take*, or the timer) owns its callback and
// must call it exactly once.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace athanor::coord {

struct HeartbeatResult;

class LongPolls {
 public:
  using Id = uint64_t;
  struct Poll {
    Id id = 0;
    std::string node;
    uint64_t known_generation = 0;
    absl::Time received;  // when the heartbeat arrived
    absl::Time deadline;
    std::function<void(HeartbeatResult)> reply;
  };

  explicit LongPolls(std::function<void(std::vector<Poll>)> expire);
  ~LongPolls();  // stops the timer; polls still parked are dropped unanswered

  Id NextId();
  void Park(Poll poll);
  std::vector<Poll> TakeNodes(const std::set<std::string>& nodes);
  std::vector<Poll> Take(Id id);  // empty when it was answered already
  std::vector<Poll> TakeAll();
  size_t size() const;
  // Waits until at least `n` polls are parked or `timeout` passes; says which.
  bool AwaitParked(size_t n, absl::Duration timeout) const;

 private:
  void TimerLoop();
  void EraseIndexes(const Poll& poll) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes the parked poll `id` (which must exist) from every index.
  Poll TakeLocked(Id id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::function<void(std::vector<Poll>)> expire_;
  mutable absl::Mutex mu_;
  Id next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::unordered_map<Id, Poll> polls_ ABSL_GUARDED_BY(mu_);
  std::unordered_multimap<std::string, Id> by_node_ ABSL_GUARDED_BY(mu_);
  std::multimap<absl::Time, Id> by_deadline_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread timer_;
};

}  // namespace athanor::coord
