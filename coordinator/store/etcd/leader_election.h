// LeaderElection: which of several coordinators sharing one etcd prefix
// leads, with a fence that keeps a deposed leader from writing.
//
// Campaign: each candidate holds a lease (`ttl`) and tries, in one
// transaction, to create `<prefix>/leader` (value: its advertised address)
// attached to its lease, if the key does not exist. The one that creates it
// leads; the key's create_revision is its term. The others wait (polling the
// key every `retry`, or until Stop) and try again once the key is gone, which
// happens when the leader revokes its lease (a clean exit) or the lease
// expires (the leader died or lost etcd), at most `ttl` after its last renewal.
//
// Renewal: the leader renews its lease every ttl/3 on a thread of its own.
// When a renewal fails for longer than it can be sure the lease still
// stands (the lease's deadline as last renewed, measured on its own clock
// from the moment it *sent* that renewal, minus `ttl`/6 of margin), it calls
// `on_lost` once: the coordinator stops serving writes at once (it exits, and
// its supervisor starts it again as a candidate).
//
// Fence: every write of the leader's store carries Fence(): the leader key's
// create_revision must still be the term. A leader cut off from etcd whose
// lease expired and whose key a new leader created fails that comparison, so
// its in-flight writes are refused by etcd itself, whatever it believes.
//
// Thread model: Campaign blocks its caller. Two threads per leader: one
// renews the lease; the other (the guard) watches the deadline the renewals
// set, so that a renewal stuck in a slow call cannot delay `on_lost`. Either
// calls `on_lost` (at most once, never under a lock of this class).
// Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "coordinator/store/etcd/etcd_client.h"

namespace athanor::coord::etcd {

class LeaderElection {
 public:
  struct Options {
    std::string prefix;   // the EtcdUri's prefix; the key is prefix + "/leader"
    std::string address;  // what this candidate advertises (its --listen, as clients dial it)
    std::chrono::seconds ttl{5};
    std::chrono::milliseconds retry{250};
    std::function<void()> on_lost;  // required
    // Optional: called from Campaign, on its caller's thread, each time it
    // sees another leader (address, term) while it waits.
    std::function<void(const std::string& leader, int64_t term)> on_waiting;
  };

  // Blocks until this candidate leads (OK), `stop` is notified (Cancelled),
  // or etcd fails for longer than `ttl` in a row (Unavailable). `client` is
  // not owned and outlives the election; `stop` may be null.
  static absl::StatusOr<std::unique_ptr<LeaderElection>> Campaign(EtcdClient* client, Options options,
                                                                  absl::Notification* stop);
  // Stops renewing and revokes the lease, so that a standby takes over at
  // once rather than after `ttl`. on_lost is not called.
  ~LeaderElection();

  int64_t term() const { return term_; }  // the leader key's create_revision
  const std::string& key() const { return key_; }
  // The comparison every write of this leader carries.
  Compare Fence() const;
  // The leader now: its address, and its term; NotFound when nobody leads.
  static absl::StatusOr<std::pair<std::string, int64_t>> Leader(EtcdClient* client, const std::string& prefix);

  // Adds this term to `<prefix>/terms`, the count of terms ever won on the
  // prefix (one per leadership change), under the fence, and returns the
  // new count. FailedPrecondition when this process no longer leads.
  absl::StatusOr<int64_t> CountTerm();

 private:
  LeaderElection(EtcdClient* client, Options options, std::string key, Lease lease, int64_t term);
  void RenewLoop();
  void GuardLoop();
  // Calls on_lost unless it was called already or the destructor runs.
  void Lost(const std::string& why);
  // Until when the lease surely stands (its deadline less a margin).
  std::chrono::steady_clock::time_point SureUntil() const;

  EtcdClient* const client_;
  const Options options_;
  const std::string key_;
  const Lease lease_;
  const int64_t term_;
  absl::Notification stopping_;
  std::atomic<bool> lost_{false};
  mutable absl::Mutex mu_;
  // The lease's expiry as etcd granted or last renewed it, counted from
  // when that request was sent.
  std::chrono::steady_clock::time_point lease_deadline_ ABSL_GUARDED_BY(mu_);
  std::thread renewer_;
  std::thread guard_;
};

}  // namespace athanor::coord::etcd
