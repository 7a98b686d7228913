// DashboardRpc: the dashboard's job page reads a job (its attempts) and its
// log tail, and its billing page a bill and balances, the way the CLI does,
// through the coordinator's own gRPC API (Coordinator.GetJob,
// Coordinator.GetLogs, Billing.GetBill, Billing.ListBalances) with the HTTP
// caller's bearer token, so that the same authorisation and tenant filtering
// apply and there is no second source of truth. Under TLS it verifies the coordinator
// against the cluster CA and presents no client certificate (a token is the
// identity, as for the CLI).
//
// Thread-safe: handlers on several HTTP threads call it at once; each call
// blocks for at most `deadline`.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "proto/athanor.grpc.pb.h"

namespace athanor::coord {

class DashboardRpc {
 public:
  // `target`: HOST:PORT of the coordinator's gRPC port; `ca_pem` empty:
  // plaintext (--insecure).
  DashboardRpc(const std::string& target, const std::string& ca_pem,
               std::chrono::milliseconds deadline = std::chrono::seconds(10));

  // `authorization`: the HTTP request's Authorization header, passed on.
  absl::StatusOr<rpc::Job> GetJob(const std::string& authorization, const std::string& job_id);
  // Coordinator.ListJobs: the caller's jobs (an admin's: all) not yet finished.
  absl::StatusOr<rpc::ListJobsResponse> ListJobs(const std::string& authorization);

  // {"attempt": N, "logs": [{"rank", "node", "tail", "error"}]}: the newest
  // attempt's ranks (at most kMaxRanks, from rank 0), each with at most
  // `tail_bytes` of its output, cut at a line start. Invalid UTF-8 is
  // replaced.
  static constexpr int kMaxRanks = 16;
  static constexpr int kMaxTailBytes = 64 << 10;
  absl::StatusOr<nlohmann::json> LogTail(const std::string& authorization, const std::string& job_id,
                                         int tail_bytes);

  // Billing.GetBill: `tenant` empty for the caller's own, `month` "YYYY-MM"
  // or empty for this month.
  absl::StatusOr<billing::Bill> GetBill(const std::string& authorization, const std::string& tenant,
                                        const std::string& month);
  // Billing.ListBalances: an admin's every tenant, a user's own.
  absl::StatusOr<rpc::ListBalancesResponse> ListBalances(const std::string& authorization);

  // The coordinator's own address for a client on this host: a wildcard
  // host (0.0.0.0, [::], empty) becomes 127.0.0.1.
  static std::string SelfTarget(const std::string& listen, int port);

 private:
  // A call's context: the deadline, and the caller's token passed on.
  void Prepare(grpc::ClientContext* ctx, const std::string& authorization) const;

  std::unique_ptr<rpc::Coordinator::Stub> stub_;
  std::unique_ptr<rpc::Billing::Stub> billing_;
  const std::chrono::milliseconds deadline_;
};

}  // namespace athanor::coord
