#include "coordinator/store/etcd/leader_election.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/logging.h"
#include "common/status.h"

namespace athanor::coord::etcd {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Waits `d`, or less when `stop` is notified; true when it was.
bool WaitOrStop(absl::Notification* stop, std::chrono::milliseconds d) {
  if (stop == nullptr) {
    absl::SleepFor(absl::FromChrono(d));
    return false;
  }
  return stop->WaitForNotificationWithTimeout(absl::FromChrono(d));
}

// A sixth of the ttl, in milliseconds (in whole seconds it would be 0 for
// any ttl under 6 s: no margin, and a guard that never waits).
std::chrono::milliseconds Margin(std::chrono::seconds ttl) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(ttl) / 6;
}

}  // namespace

absl::StatusOr<std::unique_ptr<LeaderElection>> LeaderElection::Campaign(EtcdClient* client, Options options,
                                                                         absl::Notification* stop) {
  if (!options.on_lost) return absl::InvalidArgumentError("leader election: on_lost is required");
  if (options.ttl < std::chrono::seconds(1)) {
    return absl::InvalidArgumentError("leader election: the lease's ttl must be at least 1 s");
  }
  if (options.retry <= std::chrono::milliseconds::zero()) options.retry = std::chrono::milliseconds(250);
  const std::string key = options.prefix + "/leader";
  std::optional<SteadyClock::time_point> failing_since;  // etcd's first failure in a row
  absl::Status last_error;
  // Records a failed round; Unavailable once they have lasted `ttl`.
  auto failed = [&](absl::Status s) -> absl::Status {
    const SteadyClock::time_point now = SteadyClock::now();
    if (!failing_since) failing_since = now;
    last_error = std::move(s);
    if (now - *failing_since >= options.ttl) {
      return absl::UnavailableError(absl::StrCat("leader election: etcd failing for ", options.ttl.count(),
                                                 " s: ", last_error.message()));
    }
    return absl::OkStatus();
  };
  std::pair<std::string, int64_t> seen;  // the leader last reported to on_waiting
  while (true) {
    if (stop != nullptr && stop->HasBeenNotified()) return absl::CancelledError("leader election: stopped");
    absl::StatusOr<RangeResult> current = client->Range(key);
    if (!current.ok()) {
      RETURN_IF_ERROR(failed(current.status()));
    } else if (!current->kvs.empty()) {
      failing_since.reset();
      std::pair<std::string, int64_t> leader{current->kvs[0].value, current->kvs[0].create_revision};
      if (leader != seen) {
        seen = leader;
        if (options.on_waiting) options.on_waiting(leader.first, leader.second);
      }
    } else {
      // Nobody leads: try to create the key on a fresh lease. The lease's
      // deadline counts from before the grant was sent.
      const SteadyClock::time_point sent = SteadyClock::now();
      absl::StatusOr<Lease> lease = client->GrantLease(options.ttl.count());
      if (!lease.ok()) {
        RETURN_IF_ERROR(failed(lease.status()));
      } else {
        absl::StatusOr<TxnResult> txn = client->Txn(
            {Compare{.key = key, .target = Compare::Target::kCreateRevision, .number = 0}},
            {Op::Put(key, options.address, lease->id), Op::Range(key)});
        if (txn.ok() && txn->succeeded && txn->ranges.size() == 1 && txn->ranges[0].size() == 1) {
          const int64_t term = txn->ranges[0][0].create_revision;
          std::unique_ptr<LeaderElection> election(new LeaderElection(client, std::move(options), key, *lease, term));
          {
            absl::MutexLock lock(&election->mu_);
            election->lease_deadline_ = sent + std::chrono::seconds(lease->ttl_s);
          }
          election->renewer_ = std::thread([e = election.get()] { e->RenewLoop(); });
          election->guard_ = std::thread([e = election.get()] { e->GuardLoop(); });
          return election;
        }
        // Another candidate won the race (or the transaction failed): this
        // lease holds nothing; let it go rather than wait for its expiry.
        (void)client->RevokeLease(lease->id);
        if (!txn.ok()) {
          RETURN_IF_ERROR(failed(txn.status()));
        } else {
          failing_since.reset();
        }
      }
    }
    if (WaitOrStop(stop, options.retry)) return absl::CancelledError("leader election: stopped");
  }
}

LeaderElection::LeaderElection(EtcdClient* client, Options options, std::string key, Lease lease, int64_t term)
    : client_(client), options_(std::move(options)), key_(std::move(key)), lease_(lease), term_(term) {}

LeaderElection::~LeaderElection() {
  lost_.store(true);  // on_lost is not called from here on
  stopping_.Notify();
  if (renewer_.joinable()) renewer_.join();
  if (guard_.joinable()) guard_.join();
  // NotFound: the lease is gone already (expired, or revoked by another).
  if (absl::Status s = client_->RevokeLease(lease_.id); !s.ok() && !absl::IsNotFound(s)) {
    ATHANOR_LOG(WARNING) << "leader election: cannot revoke lease " << lease_.id << " (standbys wait for its "
                         << lease_.ttl_s << " s ttl): " << s;
  }
}

Compare LeaderElection::Fence() const {
  return Compare{.key = key_, .target = Compare::Target::kCreateRevision, .number = term_};
}

absl::StatusOr<int64_t> LeaderElection::CountTerm() {
  const std::string key = options_.prefix + "/terms";
  // Another writer of the key can only be a deposed leader's late count;
  // the mod-revision comparison retries past it (a few times at most).
  for (int attempt = 0; attempt < 5; ++attempt) {
    ASSIGN_OR_RETURN(RangeResult current, client_->Range(key));
    int64_t count = 0;
    int64_t mod_revision = 0;
    if (!current.kvs.empty()) {
      if (!absl::SimpleAtoi(current.kvs[0].value, &count) || count < 0) {
        ATHANOR_LOG(WARNING) << key << " holds '" << current.kvs[0].value << "', not a count: counting from 0";
        count = 0;
      }
      mod_revision = current.kvs[0].mod_revision;
    }
    ASSIGN_OR_RETURN(TxnResult r,
                     client_->Txn({Fence(), Compare{.key = key, .target = Compare::Target::kModRevision,
                                                    .number = mod_revision}},
                                  {Op::Put(key, absl::StrCat(count + 1))}, {Op::Range(key_)}));
    if (r.succeeded) return count + 1;
    if (r.ranges.empty() || r.ranges[0].empty() || r.ranges[0][0].create_revision != term_) {
      return absl::FailedPreconditionError(absl::StrCat("term ", term_, " is over: another coordinator leads"));
    }
  }
  return absl::AbortedError(absl::StrCat(key, " kept changing under this leader"));
}

absl::StatusOr<std::pair<std::string, int64_t>> LeaderElection::Leader(EtcdClient* client,
                                                                       const std::string& prefix) {
  ASSIGN_OR_RETURN(RangeResult current, client->Range(prefix + "/leader"));
  if (current.kvs.empty()) return absl::NotFoundError("no coordinator leads");
  return std::make_pair(current.kvs[0].value, current.kvs[0].create_revision);
}

void LeaderElection::Lost(const std::string& why) {
  if (lost_.exchange(true)) return;
  ATHANOR_LOG(ERROR) << "leader election: lost the lead of term " << term_ << ": " << why;
  options_.on_lost();
}

SteadyClock::time_point LeaderElection::SureUntil() const {
  absl::MutexLock lock(&mu_);
  // A sixth of the ttl of margin for the difference between this clock's
  // rate and etcd's.
  return lease_deadline_ - Margin(options_.ttl);
}

void LeaderElection::RenewLoop() {
  const std::chrono::milliseconds period = std::chrono::duration_cast<std::chrono::milliseconds>(options_.ttl) / 3;
  std::chrono::milliseconds wait = period;
  while (!stopping_.WaitForNotificationWithTimeout(absl::FromChrono(wait))) {
    const SteadyClock::time_point sent = SteadyClock::now();
    absl::StatusOr<int64_t> left = client_->KeepAlive(lease_.id);
    if (left.ok() && *left > 0) {
      absl::MutexLock lock(&mu_);
      lease_deadline_ = sent + std::chrono::seconds(*left);
      wait = period;
      continue;
    }
    if (stopping_.HasBeenNotified()) return;
    if ((left.ok() && *left <= 0) || absl::IsNotFound(left.status())) {
      // etcd says the lease is gone: revoked or expired.
      Lost(absl::StrCat("lease ", lease_.id, " expired or was revoked"));
      return;
    }
    ATHANOR_LOG(WARNING) << "leader election: cannot renew lease " << lease_.id << ": " << left.status();
    wait = std::min(period, options_.retry);  // the guard decides when it is too late
  }
}

void LeaderElection::GuardLoop() {
  while (true) {
    const SteadyClock::time_point until = SureUntil();
    const SteadyClock::time_point now = SteadyClock::now();
    if (now >= until) {
      Lost(absl::StrCat("lease ", lease_.id, " not renewed in time (etcd unreachable?)"));
      return;
    }
    // Wakes at the deadline as it stands, or earlier to re-read it (each
    // renewal moves it forward).
    const auto wait = std::min<SteadyClock::duration>(until - now, Margin(options_.ttl));
    if (stopping_.WaitForNotificationWithTimeout(absl::FromChrono(wait))) return;
    if (lost_.load()) return;
  }
}

}  // namespace athanor::coord::etcd
