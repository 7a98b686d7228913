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
  const int depth = store_->max_rounds_in_flight();
  if (depth > 1) {
    for (int i = 0; i < depth; ++i) writers_.emplace_back([this] { WriterLoop(); });
    thread_ = std::thread([this, depth] { LoopPipelined(static_cast<size_t>(depth)); });
  } else {
    thread_ = std::thread([this] { Loop(); });
  }
}

GroupCommitter::~GroupCommitter() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
  {
    absl::MutexLock lock(&mu_);
    writers_stop_ = true;
  }
  for (std::thread& w : writers_) w.join();
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

void GroupCommitter::Finish(Flight& f, const absl::Status& s) {
  for (Batch& b : f.batches) b.done(s);
  if (s.ok()) on_durable_(f.touched, f.generation);
}

void GroupCommitter::WriterLoop() {
  for (;;) {
    std::shared_ptr<Flight> f;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return writers_stop_ || !to_write_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (to_write_.empty()) return;
      f = std::move(to_write_.front());
      to_write_.pop_front();
    }
    const auto write_start = std::chrono::steady_clock::now();
    absl::Status s = store_->CommitRound(f->merged, f->round);
    // Aborted: it reached the store before the round written before it.
    // Once that one is done, again; at most a few times, so that a store
    // that keeps refusing fails the round instead of spinning.
    for (int tries = 0; absl::IsAborted(s) && tries < 3; ++tries) {
      std::shared_ptr<Flight> before;
      {
        absl::MutexLock lock(&mu_);
        before = f->before;
        if (before != nullptr) {
          auto done = [&before]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return before->written; };
          mu_.Await(absl::Condition(&done));
          if (!before->status.ok()) break;  // it failed: so does this one (the committer sorts it out)
        }
      }
      s = store_->CommitRound(f->merged, f->round);
    }
    if (on_write_) {
      const Duration took = std::chrono::steady_clock::now() - write_start;
      absl::MutexLock one_at_a_time(&on_write_mu_);
      on_write_(took, store_->log());
    }
    absl::MutexLock lock(&mu_);
    f->status = std::move(s);
    f->written = true;
    f->before.reset();  // the chain holds only the rounds in flight
  }
}

void GroupCommitter::LoopPipelined(size_t depth) {
  // What failed rounds left to write, retried first in the next one.
  Changes carry;
  std::set<std::string> carry_touched;
  uint64_t carry_generation = 0;
  bool retry_pending = false;
  // The next round's number; unknown (0) until the store says which landed
  // last, at start and after a failure.
  uint64_t next_round = 0;
  std::shared_ptr<Flight> last_sent;  // the newest round that writes
  for (;;) {
    std::shared_ptr<Flight> head;
    std::deque<Batch> round;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        if (!flights_.empty() && flights_.front()->written) return true;
        if (flights_.size() < depth && (!queue_.empty() || retry_pending)) return true;
        return stop_ && queue_.empty() && flights_.empty();
      };
      if (retry_pending && flights_.empty()) {
        mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(100));
      } else {
        mu_.Await(absl::Condition(&ready));
      }
      if (!flights_.empty() && flights_.front()->written) {
        head = std::move(flights_.front());
        flights_.pop_front();
      } else if (stop_ && queue_.empty() && flights_.empty() && !retry_pending) {
        return;
      } else if (flights_.size() < depth && (!queue_.empty() || retry_pending)) {
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
      } else {
        continue;  // a retry's backoff ran out with rounds still in flight
      }
    }

    if (head != nullptr && head->status.ok()) {
      Finish(*head, absl::OkStatus());
      continue;
    }
    if (head != nullptr) {
      // A round failed. The ones after it are in flight or done; once all
      // are, the store says which landed.
      std::deque<std::shared_ptr<Flight>> rest;
      {
        absl::MutexLock lock(&mu_);
        auto all_written = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          for (const auto& f : flights_) {
            if (!f->written) return false;
          }
          return true;
        };
        mu_.Await(absl::Condition(&all_written));
        rest.swap(flights_);
      }
      rest.push_front(std::move(head));
      absl::StatusOr<uint64_t> last = store_->LastRound();
      ATHANOR_LOG(ERROR) << "cannot persist state: " << rest.front()->status << " (retrying)";
      const absl::Status failed = absl::UnavailableError(
          absl::StrCat("coordinator store: ", rest.front()->status.message()));
      // Rounds land in order: those up to the last that landed are durable,
      // the rest are not, and an empty round is as durable as all before it.
      bool all_landed = true;
      for (auto& f : rest) {
        const bool landed = f->round == 0 ? all_landed : last.ok() && f->round <= *last;
        if (landed) {
          Finish(*f, absl::OkStatus());
          continue;
        }
        all_landed = false;
        Merge(&carry, std::move(f->merged));
        carry_touched.insert(f->touched.begin(), f->touched.end());
        carry_generation = std::max(carry_generation, f->generation);
        for (Batch& b : f->batches) b.done(failed);
      }
      retry_pending = !carry.empty();
      next_round = last.ok() ? *last + 1 : 0;
      last_sent.reset();
      absl::MutexLock lock(&mu_);
      if (stop_ && queue_.empty()) return;  // shutting down: what could not be written is lost
      continue;
    }

    // A new round: what failed rounds left first, then the queue's batches.
    if (next_round == 0) {
      absl::StatusOr<uint64_t> last = store_->LastRound();
      if (!last.ok()) {
        ATHANOR_LOG(ERROR) << "cannot persist state: " << last.status() << " (retrying)";
        const absl::Status failed = absl::UnavailableError(
            absl::StrCat("coordinator store: ", last.status().message()));
        for (Batch& b : round) {
          Merge(&carry, std::move(b.changes));
          carry_touched.insert(b.touched.begin(), b.touched.end());
          carry_generation = std::max(carry_generation, b.generation);
          b.done(failed);
        }
        retry_pending = !carry.empty();
        absl::MutexLock lock(&mu_);
        if (stop_ && queue_.empty()) return;  // shutting down: what could not be written is lost
        continue;
      }
      next_round = *last + 1;
    }
    auto f = std::make_shared<Flight>();
    f->merged = std::move(carry);
    f->touched = std::move(carry_touched);
    f->generation = carry_generation;
    carry = Changes();
    carry_touched.clear();
    carry_generation = 0;
    retry_pending = false;
    for (Batch& b : round) {
      Merge(&f->merged, std::move(b.changes));
      f->touched.insert(b.touched.begin(), b.touched.end());
      f->generation = std::max(f->generation, b.generation);
    }
    f->batches = std::move(round);
    absl::MutexLock lock(&mu_);
    if (f->merged.empty()) {
      f->written = true;  // nothing to write: done once every round before it is
    } else {
      ++stats_.rounds;
      f->round = next_round++;
      f->before = last_sent;
      last_sent = f;
      to_write_.push_back(f);
    }
    flights_.push_back(std::move(f));
  }
}

}  // namespace athanor::coord
