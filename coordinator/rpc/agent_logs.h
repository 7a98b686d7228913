// AgentLogReader: ranks' log tails, read from the agents that ran them
// (AgentControl.ReadLog, 5 s deadline each) for the Coordinator's GetLogs.
// Calls to agents use mutual TLS and expect the node's certificate; one
// channel per agent is kept and reused. A rank whose agent cannot be reached
// gets an error in its entry, never a failed call.
//
// Thread-safe. `agent_tls` (null: plain channels, --insecure) is not owned
// and outlives the reader.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/core/log_targets.h"
#include "proto/athanor.grpc.pb.h"
#include "security/tls.h"

namespace athanor::coord {

class AgentLogReader {
 public:
  static constexpr int64_t kMaxLogBytes = 1 << 20;  // per rank: its log's tail

  explicit AgentLogReader(const security::TlsMaterial* agent_tls) : agent_tls_(agent_tls) {}

  // The logs of targets[start...] (at most `tail` bytes each) into `resp`,
  // as many as one reply holds under gRPC's 4 MiB message limit;
  // resp->next_page_start says where the next page starts when they do not
  // all fit. `start` < targets.size() unless both are 0.
  void ReadPage(const std::string& job_id, const std::vector<LogTarget>& targets, size_t start,
                int64_t tail, rpc::GetLogsResponse* resp);

 private:
  // One rank's log tail from its agent, or the error.
  void ReadRank(const std::string& job_id, const LogTarget& target, int64_t max_bytes,
                rpc::RankLog* log);
  // The agent of `node` at `address`.
  std::shared_ptr<rpc::AgentControl::Stub> Stub(const std::string& node, const std::string& address);

  const security::TlsMaterial* const agent_tls_;
  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<rpc::AgentControl::Stub>> stubs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace athanor::coord
