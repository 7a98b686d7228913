// A synthetic fleet of node agents in one process, speaking the real NodeAgent
// protocol to a coordinator: RegisterNode with an inventory, then the loop of
// worker/agent/agent.cc: a long-poll Heartbeat (known_generation, max_wait_ms
// = the interval RegisterNode returned) reporting every rank, converging to
// the desired set. A desired rank is reported RUNNING on the next heartbeat
// and EXITED with code 0 after `run_time` (or as `rank_plan` says); as in the
// real agent, an exit cancels the heartbeat in flight and is reported at once
// with max_wait_ms 0. A rank marked terminate is reported killed by SIGTERM;
// ranks no longer desired are forgotten. The fleet starts as a rolling start:
// at most `register_concurrency` RegisterNode calls in flight, the rest
// queued. A node can be lost (Silence: its agent stops calling, so the
// coordinator's heartbeat timeout marks it DOWN) and come back (Revive: a
// rebooted agent, knowing no ranks, registers again).
//
// Threading: every RPC goes through gRPC's callback API, so N agents need no
// thread each; their callbacks run on gRPC's own threads. One timer thread
// fires rank exits, retry back-offs and the calls' deadlines. Each agent's
// state is guarded by its own mutex; no callback or RPC is started while an
// agent's mutex is held. The public methods are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "testing/coordinator/latency.h"
#include "testing/coordinator/timer_queue.h"
#include "proto/athanor.grpc.pb.h"

namespace athanor::bench {

// How one rank of a job behaves: it runs for `run_time`, then exits with
// `exit_code` (0: success; anything else fails the attempt).
struct SimRankPlan {
  std::chrono::milliseconds run_time{0};
  int32_t exit_code = 0;
};

struct SimFleetOptions {
  std::string address;               // the coordinator, HOST:PORT, or a list of them (a,b,c)
  int agents = 1000;
  int connections = 0;               // TCP connections shared round-robin; 0: one per agent
  // A cluster CA folder: each agent presents its own node certificate (issued
  // into it on first use) over mutual TLS, on a connection of its own.
  // Empty: plaintext, for a coordinator started --insecure.
  std::string tls_dir;
  int gpus_per_agent = 8;
  // Agent i reports gpu_models[i % size] as its GPU model; empty: "H200".
  std::vector<std::string> gpu_models;
  // RegisterNode calls in flight at once across the fleet (a rolling start);
  // the others wait their turn. 0: no limit (every agent at once).
  int register_concurrency = 64;
  std::chrono::milliseconds run_time{2000};  // how long each rank "runs"
  // Per rank, from its spec (its job's env, attempt, ...); when set it
  // replaces `run_time`. Called on gRPC's threads with no lock held by the
  // fleet's caller: it must be thread-safe and must not block.
  std::function<SimRankPlan(const rpc::RankSpec&)> rank_plan;
  // A heartbeat's deadline: the long poll's wait plus this.
  std::chrono::milliseconds heartbeat_slack{5000};
  std::string name_prefix = "sim";
};

struct FleetCounters {
  int64_t registered = 0;            // agents that registered at least once (not reset)
  int64_t heartbeats = 0;            // answered heartbeats
  int64_t heartbeat_errors = 0;      // failed heartbeats and registrations (not cancels)
  int64_t ranks_started = 0;         // desired ranks first reported RUNNING
  int64_t ranks_exited = 0;          // ranks reported EXITED with code 0
  int64_t ranks_failed = 0;          // ranks reported EXITED with their plan's nonzero code
  int64_t reregisters = 0;           // replies asking the agent to register again
  std::vector<double> rtt_ms;        // reply - send - held_ms, every answered heartbeat
  std::vector<double> rtt_nowait_ms; // the same, heartbeats sent with max_wait_ms = 0
  std::string first_error;           // the first failure's RPC, code and message
};

class SimFleet {
 public:
  explicit SimFleet(SimFleetOptions options);
  ~SimFleet();  // Stop()
  SimFleet(const SimFleet&) = delete;
  SimFleet& operator=(const SimFleet&) = delete;

  // Registers every agent (asynchronously) and starts their heartbeat loops.
  void Start();
  // Blocks until every agent has registered once, or `timeout` passes.
  bool WaitRegistered(std::chrono::milliseconds timeout);
  // The counters since the previous Take (or Start), and resets them.
  FleetCounters Take();
  // Ends every loop, cancels RPCs in flight and waits for their callbacks.
  void Stop();

  // The node name and GPU model agent `agent` (0 .. agents-1) registers with.
  std::string NodeName(int agent) const;
  std::string GpuModel(int agent) const;
  // Node loss: the agent stops calling the coordinator (its call in flight
  // is cancelled), so that the coordinator's heartbeat timeout marks the
  // node DOWN. No effect on a silent agent.
  void Silence(int agent);
  // The node is back, as after a reboot: the agent forgets its ranks and
  // registers again. No effect unless silent.
  void Revive(int agent);

 private:
  struct Agent;
  struct Call;

  // Whether `life` (an RPC's or timer's) is still the agent's: Silence ends
  // a life, so that nothing it started sends again.
  static bool Alive(Agent* a, uint64_t life);
  void SendRegister(Agent* a);
  void OnRegistered(Agent* a, std::shared_ptr<Call> call, const grpc::Status& s);
  void SendHeartbeat(Agent* a);
  void OnHeartbeat(Agent* a, std::shared_ptr<Call> call, const grpc::Status& s);
  // Applies a heartbeat reply's desired set. Requires a->mu.
  void Converge(Agent* a, const rpc::HeartbeatResponse& resp);
  void FireRankExits(Agent* a);
  void CountError(const char* rpc, const grpc::Status& s);
  // Gives `call` its deadline, `limit` from now, and cancels it then (gRPC's
  // own deadline timers are off); Verdict reports such a cancel as
  // DEADLINE_EXCEEDED, as gRPC would. Call just before starting it.
  void Watch(const std::shared_ptr<Call>& call, TimerQueue::Clock::duration limit);
  static grpc::Status Verdict(const Call& call, const grpc::Status& s);
  void CallDone();

  const SimFleetOptions options_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<rpc::NodeAgent::Stub>> stubs_;
  std::vector<std::unique_ptr<Agent>> agents_;
  std::atomic<bool> stopping_{false};

  std::atomic<int64_t> registered_{0}, heartbeats_{0}, errors_{0}, started_{0}, exited_{0},
      failed_{0}, reregisters_{0};
  LatencyRecorder rtt_, rtt_nowait_;
  absl::Mutex error_mu_;
  std::string first_error_ ABSL_GUARDED_BY(error_mu_);

  absl::Mutex mu_;
  int64_t calls_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int registers_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<Agent*> register_queue_ ABSL_GUARDED_BY(mu_);
  TimerQueue timers_;  // rank exits and retry back-offs
};

}  // namespace athanor::bench
