#include "coordinator/store/group_commit.h"

#include <algorithm>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/logging.h"

namespace athanor::coord {

size_t RecordCount(const Changes& c) {
  return c.jobs.size() + c.nodes.size() + c.quotas.size() + c.prices.size() + c.plans.size() + c.ledger.size() +
         c.images.size() + c.volumes.size() + c.snapshots.size();
}

GroupCommitter::GroupCommitter(std::unique_ptr<Store> store, OnDurable on_durable,
                               OnWrite on_write, size_t max_round_records)
    : store_(std::move(store)),
      on_durable_(std::move(on_durable)),
      on_write_(std::move(on_write)),
      max_round_records_(std::min(max_round_records, store_->max_commit_records())) {
  thread_ = std::thread([this] { Loop(); });
}

GroupCommitter::~GroupCommitter() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void GroupCommitter::Commit(Changes changes, std::set<std::string> touched_nodes,
                            uint64_t generation, Done done) {
  absl::MutexLock lock(&mu_);
  queue_.push_back({std::move(changes), std::move(touched_nodes), generation, std::move(done)});
}

GroupCommitter::Stats GroupCommitter::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void GroupCommitter::Merge(Changes* into, Changes from) {
  // Snapshots are whole records: the newest of each wins.
  std::map<int64_t, size_t> job_at;
  for (size_t i = 0; i < into->jobs.size(); ++i) job_at[into->jobs[i].seq] = i;
  for (JobRecord& j : from.jobs) {
    auto it = job_at.find(j.seq);
    if (it != job_at.end()) {
      into->jobs[it->second] = std::move(j);
    } else {
      job_at[j.seq] = into->jobs.size();
      into->jobs.push_back(std::move(j));
    }
  }
  std::map<std::string, size_t> node_at;
  for (size_t i = 0; i < into->nodes.size(); ++i) node_at[into->nodes[i].name] = i;
  for (NodeRecord& n : from.nodes) {
    auto it = node_at.find(n.name);
    if (it != node_at.end()) {
      into->nodes[it->second] = std::move(n);
    } else {
      node_at[n.name] = into->nodes.size();
      into->nodes.push_back(std::move(n));
    }
  }
  for (auto& [tenant, gpus] : from.quotas) into->quotas[tenant] = gpus;
  // Billing: in order, so that a price's or plan's later row replaces its
  // earlier one as the store writes them; ledger entries are each appended once.
  for (billing::Price& p : from.prices) into->prices.push_back(std::move(p));
  for (billing::Plan& p : from.plans) into->plans.push_back(std::move(p));
  for (billing::LedgerEntry& e : from.ledger) into->ledger.push_back(std::move(e));
  for (ImageChange& i : from.images) into->images.push_back(std::move(i));  // in order, as billing's
  for (VolumeChange& v : from.volumes) into->volumes.push_back(std::move(v));
  for (SnapshotChange& s : from.snapshots) into->snapshots.push_back(std::move(s));
}

void GroupCommitter::Loop() {
  // What a failed round left to write, retried first in the next one.
  Changes carry;
  std::set<std::string> carry_touched;
  uint64_t carry_generation = 0;
  bool retry_pending = false;
  for (;;) {
    std::deque<Batch> round;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty(); };
      if (retry_pending) {
        mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(100));
      } else {
        mu_.Await(absl::Condition(&ready));
      }
      if (queue_.empty() && stop_ && !retry_pending) return;
      // Merging never adds records (a later snapshot replaces one), so the
      // sum of the batches' counts bounds the merged round's.
      size_t held = RecordCount(carry);
      while (!queue_.empty()) {
        const size_t n = RecordCount(queue_.front().changes);
        const bool first = round.empty() && held == 0;
        if (!first && held + n > max_round_records_) break;
        held += n;
        round.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      stats_.batches += round.size();
      if (!round.empty() || retry_pending) ++stats_.rounds;
    }
    Changes merged = std::move(carry);
    std::set<std::string> touched = std::move(carry_touched);
    uint64_t generation = carry_generation;
    for (Batch& b : round) {
      Merge(&merged, std::move(b.changes));
      touched.insert(b.touched.begin(), b.touched.end());
      generation = std::max(generation, b.generation);
    }
    const auto write_start = std::chrono::steady_clock::now();
    absl::Status s = merged.empty() ? absl::OkStatus() : store_->Commit(merged);
    if (on_write_ && !merged.empty()) {
      const Duration took = std::chrono::steady_clock::now() - write_start;
      on_write_(took, store_->log());
    }
    if (s.ok()) {
      carry = Changes();
      carry_touched.clear();
      carry_generation = 0;
      retry_pending = false;
    } else {
      ATHANOR_LOG(ERROR) << "cannot persist state: " << s << " (retrying)";
      carry = std::move(merged);
      carry_touched = std::move(touched);
      carry_generation = generation;
      retry_pending = true;
      s = absl::UnavailableError(absl::StrCat("coordinator store: ", s.message()));
      absl::MutexLock lock(&mu_);
      if (stop_ && queue_.empty()) {
        for (Batch& b : round) b.done(s);
        return;  // shutting down: what could not be written is lost with the process
      }
    }
    // The round's callers first (a submission's answer is one message), then
    // the long polls its changes answer (a desired set built for each).
    for (Batch& b : round) b.done(s);
    if (s.ok()) on_durable_(touched, generation);
  }
}

}  // namespace athanor::coord
