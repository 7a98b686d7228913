#include "coordinator/core/coordinator_core.h"

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/logging.h"
#include "common/status.h"

namespace athanor::coord {
namespace {

// Passes closer together than this share the lock with submissions unfairly.
constexpr absl::Duration kMinPassSpacing = absl::Milliseconds(5);
// A poll whose wait ended while its node's new desired set is still being
// written waits this much longer for the commit.
constexpr absl::Duration kDurableWait = absl::Milliseconds(20);

}  // namespace

absl::StatusOr<std::unique_ptr<CoordinatorCore>> CoordinatorCore::Create(
    StateOptions options, std::unique_ptr<Store> store, const Clock* clock,
    Duration tick_interval, Duration checkpoint_poll, CoreObserver* observer) {
  ASSIGN_OR_RETURN(Store::Contents contents, store->LoadAll());
  ATHANOR_LOG(INFO) << "state: " << contents.jobs.size() << " job(s), "
                    << contents.nodes.size() << " node(s)";
  std::unique_ptr<CoordinatorCore> core(new CoordinatorCore(std::move(options), clock, observer));
  CoordinatorCore* c = core.get();
  {
    absl::MutexLock lock(&c->mu_);
    c->state_.Restore(std::move(contents.jobs), contents.nodes, contents.quotas);
    RETURN_IF_ERROR(c->state_.billing().Restore(std::move(contents.prices), std::move(contents.plans),
                                             std::move(contents.ledger)));
    c->state_.images().Restore(std::move(contents.images));
    RETURN_IF_ERROR(c->state_.volumes().Restore(std::move(contents.volumes)));
    RETURN_IF_ERROR(c->state_.snapshots().Restore(std::move(contents.snapshots)));
    c->state_.TakeChanges();  // restoring changes nothing on disk
    c->durable_generation_ = c->state_.log().generation();
  }
  c->committer_ = std::make_unique<GroupCommitter>(
      std::move(store),
      [c](const std::set<std::string>& nodes, uint64_t gen) { c->OnDurable(nodes, gen); },
      observer == nullptr ? GroupCommitter::OnWrite()
                          : [observer](Duration d, const StoreLog& log) { observer->AfterCommit(d, log); });
  c->polls_ = std::make_unique<LongPolls>(
      [c](std::vector<LongPolls::Poll> polls) { c->Resolve(std::move(polls), true); });
  c->scheduler_ = std::thread([c, tick_interval] { c->SchedulerLoop(tick_interval); });
  c->checkpoint_committer_ = std::make_unique<CheckpointCommitter>(
      [c](const std::string& id, int64_t step, int64_t commit_unix) {
        c->ReportCheckpoint(id, step, commit_unix, [id, step](absl::Status s) {
          if (!s.ok()) ATHANOR_LOG(WARNING) << "job " << id << ": checkpoint step " << step << ": " << s;
        });
      },
      clock);
  if (checkpoint_poll > Duration::zero()) {
    c->checkpoint_poller_ = std::make_unique<CheckpointPoller>(
        [c] { return c->CheckpointTargets(); },
        [c](const std::string& id, int64_t step, int64_t commit_unix) {
          c->ReportCheckpoint(id, step, commit_unix, [id, step](absl::Status s) {
            if (!s.ok()) ATHANOR_LOG(WARNING) << "job " << id << ": checkpoint step " << step << ": " << s;
          });
        },
        checkpoint_poll,
        [c](const std::string& id, const std::string& uri) {
          if (auto s = c->checkpoint_committer_->CompleteSteps(id, uri, 0); !s.ok()) {
            ATHANOR_LOG(WARNING) << "job " << id << ": completing checkpoint steps: " << s.status();
          }
        });
  }
  return core;
}

CoordinatorCore::CoordinatorCore(StateOptions options, const Clock* clock, CoreObserver* observer)
    : state_(std::move(options), clock), observer_(observer) {}

CoordinatorCore::~CoordinatorCore() {
  Shutdown();
  if (scheduler_.joinable()) scheduler_.join();
  checkpoint_poller_.reset();
  checkpoint_committer_.reset();
  // The committer writes what is queued and reports each batch durable
  // (OnDurable), which wakes long polls: the polls go after it.
  committer_.reset();
  polls_.reset();
}

void CoordinatorCore::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    shutdown_ = true;
  }
  for (LongPolls::Poll& p : polls_->TakeAll()) {
    HeartbeatResult r;
    r.status = absl::UnavailableError("the coordinator is shutting down");
    p.reply(std::move(r));
  }
}

void CoordinatorCore::CommitLocked(GroupCommitter::Done done) {
  std::set<std::string> touched;
  Changes changes = state_.TakeChanges(&touched);
  if (!done && changes.empty() && touched.empty()) return;  // nothing to write or to wait for
  if (!done) done = [](absl::Status) {};  // failures are logged and retried by the committer
  committer_->Commit(std::move(changes), std::move(touched), state_.log().generation(),
                     std::move(done));
}

void CoordinatorCore::OnDurable(const std::set<std::string>& nodes, uint64_t generation) {
  {
    // Under mu_, so that a heartbeat deciding to park sees either the old
    // value and parks before this, or the new one and answers at once.
    absl::MutexLock lock(&mu_);
    durable_generation_ = std::max(durable_generation_, generation);
  }
  if (!nodes.empty()) Resolve(polls_->TakeNodes(nodes), false);
}

absl::Status CoordinatorCore::Write(absl::FunctionRef<absl::Status(ClusterState&)> write) {
  absl::Notification durable;
  absl::Status commit;
  absl::Status result;
  {
    absl::MutexLock lock(&mu_);
    result = write(state_);
    CommitLocked([&](absl::Status s) {
      commit = s;
      durable.Notify();
    });
  }
  durable.WaitForNotification();
  return result.ok() ? commit : result;
}

void CoordinatorCore::SubmitJob(const JobSpec& spec, const std::string& key, SubmitDone done,
                                int32_t max_pending) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<SubmitResult> r = state_.SubmitJob(spec, key, max_pending);
  // A refused job changed nothing, but is answered in order all the same.
  CommitLocked([r = std::move(r), done = std::move(done)](absl::Status s) {
    done(s.ok() || !r.ok() ? r : absl::StatusOr<SubmitResult>(s));
  });
}

HeartbeatResult CoordinatorCore::ReplyLocked(const LongPolls::Poll& poll) {
  HeartbeatResult r;
  r.generation = state_.log().NodeGeneration(poll.node);
  r.desired = ClusterAgents::DesiredFor(state_, poll.node);
  r.held = absl::ToChronoNanoseconds(absl::Now() - poll.received);
  return r;
}

void CoordinatorCore::Heartbeat(LongPolls::Id id, HeartbeatRequest req,
                                std::function<void(HeartbeatResult)> reply) {
  LongPolls::Poll poll{id, req.node, req.known_generation, absl::Now(),
                       absl::Now() + absl::FromChrono(req.max_wait), std::move(reply)};
  HeartbeatResult now;
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) {
      now.status = absl::UnavailableError("the coordinator is shutting down");
    } else if (!state_.agents().Heartbeat(req.node, req.known_generation, req.ranks, req.health_ok,
                                          req.health_message)) {
      now.reregister = true;
    } else {
      state_.images().SetCached(req.node, std::move(req.cached_images));
      CommitLocked(nullptr);  // reports: durable with the next round
      const uint64_t gen = state_.log().NodeGeneration(req.node);
      if (gen <= durable_generation_ && (gen != req.known_generation || req.max_wait <= Duration::zero())) {
        now = ReplyLocked(poll);
      } else {
        polls_->Park(std::move(poll));
        return;
      }
    }
  }
  poll.reply(std::move(now));
}

void CoordinatorCore::CancelHeartbeat(LongPolls::Id id) {
  for (LongPolls::Poll& p : polls_->Take(id)) {
    HeartbeatResult r;
    r.status = absl::CancelledError("the agent cancelled its heartbeat");
    p.reply(std::move(r));
  }
}

void CoordinatorCore::Resolve(std::vector<LongPolls::Poll> polls, bool expired) {
  std::vector<std::pair<LongPolls::Poll, HeartbeatResult>> answers;
  {
    absl::MutexLock lock(&mu_);
    for (LongPolls::Poll& p : polls) {
      const uint64_t gen = state_.log().NodeGeneration(p.node);
      const bool durable = gen <= durable_generation_;
      if (durable && (expired || gen != p.known_generation)) {
        HeartbeatResult r = ReplyLocked(p);
        answers.emplace_back(std::move(p), std::move(r));
        continue;
      }
      if (expired) p.deadline = absl::Now() + kDurableWait;
      polls_->Park(std::move(p));
    }
  }
  for (auto& [poll, result] : answers) poll.reply(std::move(result));
}

void CoordinatorCore::SchedulerLoop(Duration tick_interval) {
  absl::MutexLock lock(&mu_);
  absl::Time next_tick = absl::Now() + absl::FromChrono(tick_interval);
  absl::Time last_pass = absl::InfinitePast();
  while (!shutdown_) {
    bool wanted = state_.TakePassWanted();
    if (!wanted) {
      // Woken by a timeout only: a pass wanted meanwhile waits for the
      // spacing below or the tick, whichever is sooner.
      mu_.AwaitWithDeadline(absl::Condition(+[](bool* b) { return *b; }, &shutdown_),
                            std::min(next_tick, absl::Now() + kMinPassSpacing));
      if (shutdown_) break;
      wanted = state_.TakePassWanted();
    } else if (absl::Now() - last_pass < kMinPassSpacing) {
      mu_.AwaitWithDeadline(absl::Condition(+[](bool* b) { return *b; }, &shutdown_),
                            last_pass + kMinPassSpacing);
      if (shutdown_) break;
    }
    const absl::Time pass_start = absl::Now();
    if (pass_start >= next_tick) {
      state_.Tick();  // includes a pass
      next_tick = absl::Now() + absl::FromChrono(tick_interval);
    } else if (wanted) {
      state_.Schedule();
    } else {
      continue;
    }
    last_pass = absl::Now();
    CommitLocked(nullptr);
    if (observer_ != nullptr) observer_->AfterPass(state_, absl::ToChronoNanoseconds(last_pass - pass_start));
  }
}

void CoordinatorCore::ApplyAsync(const std::function<absl::Status(ClusterState&)>& op,
                                 Done done) {
  absl::MutexLock lock(&mu_);
  absl::Status result = op(state_);
  CommitLocked([result, done = std::move(done)](absl::Status s) { done(result.ok() ? s : result); });
}

void CoordinatorCore::RegisterNode(const NodeRecord& node, const std::vector<RankReport>& ranks,
                                   Done done) {
  ApplyAsync([&](ClusterState& s) { return s.agents().Register(node, ranks); }, std::move(done));
}

void CoordinatorCore::ReportCheckpoint(const std::string& id, int64_t step, int64_t commit_unix,
                                       Done done) {
  ApplyAsync(
      [&](ClusterState& s) { return s.checkpoints().ReportCheckpoint(id, step, commit_unix); },
      std::move(done));
}

void CoordinatorCore::ReportShardUpload(const std::string& id, int32_t attempt, int64_t step,
                                        int32_t rank, int32_t world_size, bool failed,
                                        const std::string& error, Done done) {
  ApplyAsync(
      [&](ClusterState& s) {
        return s.checkpoints().ReportShardUpload(id, attempt, step, rank, world_size, failed, error);
      },
      std::move(done));
}

void CoordinatorCore::RecordTelemetry(const std::string& id, const TelemetryFigures& figures,
                                      Done done) {
  ApplyAsync([&](ClusterState& s) { return s.jobs().RecordTelemetry(id, figures); }, std::move(done));
}

void CoordinatorCore::Read(absl::FunctionRef<void(const ClusterState&)> read) {
  absl::MutexLock lock(&mu_);
  read(state_);
}

std::optional<std::string> CoordinatorCore::StoreUriLocked(const JobRecord& job) {
  if (!store_uri_resolver_) return job.spec.checkpoint_uri;
  return store_uri_resolver_(job.spec.tenant, job.spec.checkpoint_uri);
}

std::optional<std::string> CoordinatorCore::StoreUriFor(const JobRecord& job) {
  absl::MutexLock lock(&mu_);
  return StoreUriLocked(job);
}

std::map<std::string, std::string> CoordinatorCore::CheckpointTargets() {
  absl::MutexLock lock(&mu_);
  std::map<std::string, std::string> targets;
  for (const auto& [seq, job] : state_.jobs().all()) {
    if (job.spec.checkpoint_uri.empty()) continue;
    // Active jobs; and requeued ones: a checkpoint service may still be
    // uploading the step their last attempt handed off, and only a poll
    // commits it when its report was lost (a coordinator restart).
    const bool requeued = job.state == JobState::kPending && job.attempt > 0;
    if (!requeued && state_.jobs().active().count(seq) == 0) continue;
    if (std::optional<std::string> uri = StoreUriLocked(job)) targets[job.id] = std::move(*uri);
  }
  return targets;
}

void CoordinatorCore::SetStoreUriResolver(StoreUriResolver resolver) {
  absl::MutexLock lock(&mu_);
  store_uri_resolver_ = std::move(resolver);
}

absl::StatusOr<SubmitResult> SubmitAndWait(CoordinatorCore* core, const JobSpec& spec,
                                           const std::string& idempotency_key) {
  absl::Notification done;
  absl::StatusOr<SubmitResult> result;
  core->SubmitJob(spec, idempotency_key, [&](absl::StatusOr<SubmitResult> r) {
    result = std::move(r);
    done.Notify();
  });
  done.WaitForNotification();
  return result;
}

HeartbeatResult HeartbeatAndWait(CoordinatorCore* core, HeartbeatRequest req) {
  absl::Notification done;
  HeartbeatResult result;
  core->Heartbeat(core->NewPollId(), std::move(req), [&](HeartbeatResult r) {
    result = std::move(r);
    done.Notify();
  });
  done.WaitForNotification();
  return result;
}

absl::Status RegisterAndWait(CoordinatorCore* core, const NodeRecord& node,
                             const std::vector<RankReport>& ranks) {
  absl::Notification done;
  absl::Status result;
  core->RegisterNode(node, ranks, [&](absl::Status s) {
    result = s;
    done.Notify();
  });
  done.WaitForNotification();
  return result;
}

}  // namespace athanor::coord
