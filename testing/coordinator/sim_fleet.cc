#include "testing/coordinator/sim_fleet.h"

#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/coordinator_channel.h"
#include "security/cluster_ca.h"
#include "security/tls.h"

namespace athanor::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kBackoff = std::chrono::milliseconds(500);  // as the real agent
constexpr auto kRegisterDeadline = std::chrono::seconds(5);

struct RankKey {
  std::string job_id;
  int32_t attempt;
  int32_t rank;
  bool operator<(const RankKey& o) const {
    return std::tie(job_id, attempt, rank) < std::tie(o.job_id, o.attempt, o.rank);
  }
};

struct SimRank {
  rpc::RankPhase phase = rpc::RANK_RUNNING;
  int32_t exit_code = 0;
  int32_t signal = 0;
  Clock::time_point exit_at;
  int32_t planned_exit_code = 0;  // reported at exit_at
};

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

}  // namespace

struct SimFleet::Agent {
  int index = 0;
  std::string name;
  rpc::NodeAgent::Stub* stub = nullptr;
  absl::Mutex mu;
  bool ever_registered ABSL_GUARDED_BY(mu) = false;
  bool silent ABSL_GUARDED_BY(mu) = false;  // lost (Silence) until Revive
  uint64_t life ABSL_GUARDED_BY(mu) = 0;    // +1 at each Silence
  int32_t interval_ms ABSL_GUARDED_BY(mu) = 1000;
  uint64_t known_generation ABSL_GUARDED_BY(mu) = 0;
  bool exit_pending ABSL_GUARDED_BY(mu) = false;
  std::map<RankKey, SimRank> ranks ABSL_GUARDED_BY(mu);
  std::shared_ptr<Call> inflight ABSL_GUARDED_BY(mu);  // the heartbeat in flight

  void AddReports(google::protobuf::RepeatedPtrField<rpc::RankReport>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    for (const auto& [key, r] : ranks) {
      rpc::RankReport* p = out->Add();
      p->set_job_id(key.job_id);
      p->set_attempt(key.attempt);
      p->set_rank(key.rank);
      p->set_phase(r.phase);
      p->set_exit_code(r.exit_code);
      p->set_signal(r.signal);
    }
  }
};

// One RPC: its context and messages live until its callback has run.
struct SimFleet::Call {
  grpc::ClientContext ctx;
  rpc::RegisterNodeRequest register_req;
  rpc::RegisterNodeResponse register_resp;
  rpc::HeartbeatRequest req;
  rpc::HeartbeatResponse resp;
  Clock::time_point sent;
  uint64_t life = 0;                   // the agent's life it was sent in
  std::atomic<bool> timed_out{false};  // cancelled by Watch at its deadline
};

void SimFleet::Watch(const std::shared_ptr<Call>& call, Clock::duration limit) {
  // Sent along as a real agent's (the server sees the same deadline).
  call->ctx.set_deadline(std::chrono::system_clock::now() + limit);
  timers_.Schedule(Clock::now() + limit, [weak = std::weak_ptr<Call>(call)] {
    if (std::shared_ptr<Call> c = weak.lock()) {
      c->timed_out = true;
      c->ctx.TryCancel();  // no effect once the call has ended
    }
  });
}

grpc::Status SimFleet::Verdict(const Call& call, const grpc::Status& s) {
  if (s.error_code() == grpc::StatusCode::CANCELLED && call.timed_out) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded");
  }
  return s;
}

SimFleet::SimFleet(SimFleetOptions options) : options_(std::move(options)) {
  int connections = options_.connections > 0 && options_.tls_dir.empty()
                        ? std::min(options_.connections, options_.agents)
                        : options_.agents;
  for (int i = 0; i < connections; ++i) {
    grpc::ChannelArguments args;  // as the real agent, plus one connection per channel
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("athanor.bench.connection", i);
    // Deadlines are enforced by the fleet's own timer (Watch), not by a gRPC
    // timer per call: a real agent has one call in flight, this process has
    // one per agent, and Debian's libgrpc keeps every pending timer in a
    // checked table whose upkeep took about 10% of the fleet's CPU.
    args.SetInt(GRPC_ARG_ENABLE_DEADLINE_CHECKS, 0);
    std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
    if (!options_.tls_dir.empty()) {
      // One node certificate per agent; a failure leaves the agent refused, which the run reports.
      std::string node = NodeName(i);
      struct stat st;
      if (stat((options_.tls_dir + "/agent-" + node + ".crt").c_str(), &st) != 0) {
        security::IssueAgentCertificate(options_.tls_dir, node).IgnoreError();
      }
      absl::StatusOr<security::TlsMaterial> m = security::LoadTlsMaterial(options_.tls_dir, "agent-" + node);
      if (m.ok()) creds = security::ClientCredentials(*m, security::kCoordinatorName, "", &args);
    }
    // A list of coordinators: the one that leads, as a real agent dials it.
    std::string target = CoordinatorDialTarget(options_.address, &args).value_or(options_.address);
    channels_.push_back(grpc::CreateCustomChannel(target, creds, args));
    stubs_.push_back(rpc::NodeAgent::NewStub(channels_.back()));
  }
  for (int i = 0; i < options_.agents; ++i) {
    auto a = std::make_unique<Agent>();
    a->index = i;
    a->name = NodeName(i);
    a->stub = stubs_[i % connections].get();
    agents_.push_back(std::move(a));
  }
}

SimFleet::~SimFleet() { Stop(); }

void SimFleet::Start() {
  for (auto& a : agents_) SendRegister(a.get());
}

bool SimFleet::WaitRegistered(std::chrono::milliseconds timeout) {
  absl::MutexLock lock(&mu_);
  auto all = [this] { return registered_.load() >= options_.agents; };
  return mu_.AwaitWithTimeout(absl::Condition(&all), absl::FromChrono(timeout));
}

FleetCounters SimFleet::Take() {
  FleetCounters c;
  c.registered = registered_.load();
  c.heartbeats = heartbeats_.exchange(0);
  c.heartbeat_errors = errors_.exchange(0);
  c.ranks_started = started_.exchange(0);
  c.ranks_exited = exited_.exchange(0);
  c.ranks_failed = failed_.exchange(0);
  c.reregisters = reregisters_.exchange(0);
  c.rtt_ms = rtt_.Take();
  c.rtt_nowait_ms = rtt_nowait_.Take();
  absl::MutexLock lock(&error_mu_);
  c.first_error.swap(first_error_);
  return c;
}

void SimFleet::Stop() {
  if (stopping_.exchange(true)) return;
  for (auto& a : agents_) {
    std::shared_ptr<Call> call;
    {
      absl::MutexLock lock(&a->mu);
      call = a->inflight;
    }
    if (call) call->ctx.TryCancel();
  }
  auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return calls_in_flight_ == 0; };
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&drained));
  }
  timers_.Stop();
  // A timer may have started one last RPC while the first wait ended.
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&drained));
}

std::string SimFleet::NodeName(int agent) const {
  return absl::StrFormat("%s-%05d", options_.name_prefix, agent);
}

std::string SimFleet::GpuModel(int agent) const {
  if (options_.gpu_models.empty()) return "H200";
  return options_.gpu_models[static_cast<size_t>(agent) % options_.gpu_models.size()];
}

void SimFleet::Silence(int agent) {
  Agent* a = agents_.at(agent).get();
  std::shared_ptr<Call> call;
  {
    absl::MutexLock lock(&a->mu);
    if (a->silent) return;
    a->silent = true;
    ++a->life;
    call.swap(a->inflight);
  }
  if (call) call->ctx.TryCancel();
}

void SimFleet::Revive(int agent) {
  Agent* a = agents_.at(agent).get();
  {
    absl::MutexLock lock(&a->mu);
    if (!a->silent) return;
    a->silent = false;
    a->ranks.clear();  // rebooted: its ranks are gone
    a->exit_pending = false;
    a->known_generation = 0;
  }
  SendRegister(a);
}

bool SimFleet::Alive(Agent* a, uint64_t life) {
  absl::MutexLock lock(&a->mu);
  return !a->silent && a->life == life;
}

void SimFleet::SendRegister(Agent* a) {
  if (stopping_) return;
  auto call = std::make_shared<Call>();
  rpc::RegisterNodeRequest& req = call->register_req;
  req.set_name(a->name);
  req.set_agent_address("127.0.0.1:1");  // never called: the bench reads no logs
  req.set_host("127.0.0.1");
  rpc::NodeInventory* inv = req.mutable_inventory();
  inv->set_gpus(options_.gpus_per_agent);
  inv->set_gpu_model(GpuModel(a->index));
  inv->set_gpu_memory_mb(143771);
  inv->set_cpus(96);
  inv->set_memory_mb(2 << 20);
  {
    absl::MutexLock lock(&a->mu);
    if (a->silent) return;
    call->life = a->life;
    a->AddReports(req.mutable_ranks());
  }
  {
    absl::MutexLock lock(&mu_);
    if (options_.register_concurrency > 0 &&
        registers_in_flight_ >= options_.register_concurrency) {
      register_queue_.push_back(a);  // sent when a registration in flight ends
      return;
    }
    ++registers_in_flight_;
    ++calls_in_flight_;
  }
  Call* c = call.get();
  Watch(call, kRegisterDeadline);
  a->stub->async()->RegisterNode(
      &c->ctx, &c->register_req, &c->register_resp,
      [this, a, call](grpc::Status s) { OnRegistered(a, call, Verdict(*call, s)); });
}

void SimFleet::OnRegistered(Agent* a, std::shared_ptr<Call> call, const grpc::Status& s) {
  Agent* queued = nullptr;
  {
    absl::MutexLock lock(&mu_);
    --registers_in_flight_;
    if (!register_queue_.empty()) {
      queued = register_queue_.front();
      register_queue_.pop_front();
    }
  }
  if (queued != nullptr) SendRegister(queued);
  if (!s.ok()) {
    if (!stopping_) {
      CountError("RegisterNode", s);
      timers_.Schedule(Clock::now() + kBackoff, [this, a, life = call->life] {
        if (Alive(a, life)) SendRegister(a);
      });
    }
  } else {
    bool first = false, current = false;
    {
      absl::MutexLock lock(&a->mu);
      current = !a->silent && a->life == call->life;  // else lost since: say nothing more
      if (current) {
        first = !a->ever_registered;
        a->ever_registered = true;
        int64_t interval = call->register_resp.heartbeat_interval_ms();
        a->interval_ms = static_cast<int32_t>(interval > 0 && interval < 60000 ? interval : 1000);
        a->known_generation = 0;
      }
    }
    if (first && ++registered_ == options_.agents) {
      absl::MutexLock lock(&mu_);  // wakes WaitRegistered
    }
    if (current) SendHeartbeat(a);
  }
  CallDone();
}

void SimFleet::SendHeartbeat(Agent* a) {
  if (stopping_) return;
  auto call = std::make_shared<Call>();
  Clock::duration limit;
  {
    absl::MutexLock lock(&a->mu);
    if (a->silent) return;
    call->life = a->life;
    call->req.set_node(a->name);
    call->req.set_known_generation(a->known_generation);
    call->req.set_health_ok(true);
    a->AddReports(call->req.mutable_ranks());
    call->req.set_max_wait_ms(a->exit_pending ? 0 : a->interval_ms);
    a->exit_pending = false;
    a->inflight = call;
    limit = std::chrono::milliseconds(a->interval_ms) + options_.heartbeat_slack;
  }
  {
    absl::MutexLock lock(&mu_);
    ++calls_in_flight_;
  }
  Call* c = call.get();
  c->sent = Clock::now();
  Watch(call, limit);
  a->stub->async()->Heartbeat(&c->ctx, &c->req, &c->resp, [this, a, call](grpc::Status s) {
    OnHeartbeat(a, call, Verdict(*call, s));
  });
}

void SimFleet::OnHeartbeat(Agent* a, std::shared_ptr<Call> call, const grpc::Status& s) {
  double elapsed_ms = MsSince(call->sent);
  enum { kNext, kRetry, kRegister, kEnd } next = kNext;
  {
    absl::MutexLock lock(&a->mu);
    if (a->inflight == call) a->inflight.reset();
    if (stopping_ || a->silent || a->life != call->life) {
      next = kEnd;  // the fleet stops, or the node was lost
    } else if (s.error_code() == grpc::StatusCode::CANCELLED) {
      next = kNext;  // cancelled to report an exit now
    } else if (!s.ok()) {
      CountError("Heartbeat", s);
      next = kRetry;
    } else if (call->resp.reregister()) {
      ++reregisters_;
      next = kRegister;
    } else {
      ++heartbeats_;
      double rtt = elapsed_ms - static_cast<double>(call->resp.held_ms());
      rtt_.Add(rtt);
      if (call->req.max_wait_ms() == 0) rtt_nowait_.Add(rtt);
      Converge(a, call->resp);
      a->known_generation = call->resp.generation();
      // The coordinator's pace, as the real agent follows it.
      const int64_t interval = call->resp.heartbeat_interval_ms();
      if (interval > 0 && interval <= 600000) a->interval_ms = static_cast<int32_t>(interval);
    }
  }
  if (!stopping_) {
    if (next == kNext) SendHeartbeat(a);
    if (next == kRegister) SendRegister(a);
    if (next == kRetry) {
      timers_.Schedule(Clock::now() + kBackoff, [this, a, life = call->life] {
        if (Alive(a, life)) SendHeartbeat(a);
      });
    }
  }
  CallDone();
}

void SimFleet::Converge(Agent* a, const rpc::HeartbeatResponse& resp) {
  std::set<RankKey> desired;
  Clock::time_point now = Clock::now();
  std::set<Clock::time_point> exit_times;  // one timer per distinct exit time
  for (const rpc::RankSpec& d : resp.desired()) {
    RankKey key{d.job_id(), d.attempt(), d.rank()};
    desired.insert(key);
    auto it = a->ranks.find(key);
    if (d.terminate()) {
      if (it != a->ranks.end() && it->second.phase == rpc::RANK_RUNNING) {
        it->second.phase = rpc::RANK_EXITED;  // SIGTERM ends a trivial rank at once
        it->second.exit_code = 128 + 15;
        it->second.signal = 15;
        a->exit_pending = true;
      }
    } else if (it == a->ranks.end()) {
      const SimRankPlan plan =
          options_.rank_plan ? options_.rank_plan(d) : SimRankPlan{options_.run_time, 0};
      SimRank& r = a->ranks[key];
      r.exit_at = now + plan.run_time;
      r.planned_exit_code = plan.exit_code;
      ++started_;
      exit_times.insert(r.exit_at);
    }
  }
  for (auto it = a->ranks.begin(); it != a->ranks.end();) {
    it = desired.count(it->first) ? std::next(it) : a->ranks.erase(it);
  }
  for (Clock::time_point t : exit_times) timers_.Schedule(t, [this, a] { FireRankExits(a); });
}

void SimFleet::FireRankExits(Agent* a) {
  std::shared_ptr<Call> inflight;
  {
    absl::MutexLock lock(&a->mu);
    Clock::time_point now = Clock::now();
    bool any = false;
    for (auto& [key, r] : a->ranks) {
      if (r.phase == rpc::RANK_RUNNING && r.exit_at <= now) {
        r.phase = rpc::RANK_EXITED;
        r.exit_code = r.planned_exit_code;
        ++(r.exit_code == 0 ? exited_ : failed_);
        any = true;
      }
    }
    if (!any) return;
    a->exit_pending = true;
    inflight = a->inflight;
  }
  if (inflight) inflight->ctx.TryCancel();  // the loop resends at once with the exit
}

void SimFleet::CountError(const char* rpc, const grpc::Status& s) {
  ++errors_;
  absl::MutexLock lock(&error_mu_);
  if (first_error_.empty()) {
    first_error_ = absl::StrCat(rpc, ": code ", s.error_code(), ": ", s.error_message());
  }
}

void SimFleet::CallDone() {
  absl::MutexLock lock(&mu_);
  --calls_in_flight_;
}

}  // namespace athanor::bench
