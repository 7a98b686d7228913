#include "coordinator/rpc/agent_logs.h"

#include <chrono>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "coordinator/model/validation.h"
#include "coordinator/rpc/agent_channel.h"

namespace athanor::coord {
namespace {

// Per GetLogs reply, under gRPC's 4 MiB default message limit: a page takes
// another rank only while that rank's largest possible entry (its log, node
// name and error) still fits.
constexpr int64_t kMaxLogPageBytes = 3 << 20;
constexpr int64_t kMaxRankLogEntryBytes =
    AgentLogReader::kMaxLogBytes + 3 * static_cast<int64_t>(kMaxStringBytes);

}  // namespace

void AgentLogReader::ReadPage(const std::string& job_id, const std::vector<LogTarget>& targets,
                              size_t start, int64_t tail, rpc::GetLogsResponse* resp) {
  if (!targets.empty()) resp->set_attempt(targets.front().attempt);
  int64_t page_bytes = 0;
  for (size_t i = start; i < targets.size(); ++i) {
    if (i > start && page_bytes + kMaxRankLogEntryBytes > kMaxLogPageBytes) {
      resp->set_next_page_start(static_cast<int32_t>(i));
      break;
    }
    ReadRank(job_id, targets[i], tail, resp->add_logs());
    const rpc::RankLog& log = resp->logs(resp->logs_size() - 1);
    page_bytes += static_cast<int64_t>(log.data().size() + log.node().size() + log.error().size());
  }
}

void AgentLogReader::ReadRank(const std::string& job_id, const LogTarget& t, int64_t max_bytes,
                              rpc::RankLog* log) {
  log->set_rank(t.rank);
  log->set_node(t.node.substr(0, kMaxStringBytes));
  if (t.agent_address.empty()) {
    log->set_error(absl::StrCat("node '", t.node.substr(0, 256), "' is not known"));
    return;
  }
  rpc::ReadLogRequest read;
  read.set_job_id(job_id);
  read.set_attempt(t.attempt);
  read.set_rank(t.rank);
  read.set_max_bytes(max_bytes);
  rpc::ReadLogResponse data;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::Status s = Stub(t.node, t.agent_address)->ReadLog(&ctx, read, &data);
  if (!s.ok()) {
    log->set_error(absl::StrCat("agent ", t.agent_address.substr(0, 256), " (node ",
                                t.node.substr(0, 256), "): ",
                                s.error_message().substr(0, 1024)));
    return;
  }
  // An agent sends at most what was asked; keep the tail should one send more.
  std::string* bytes = data.mutable_data();
  if (bytes->size() > static_cast<size_t>(max_bytes)) {
    bytes->erase(0, bytes->size() - static_cast<size_t>(max_bytes));
  }
  log->set_data(std::move(*bytes));
}

std::shared_ptr<rpc::AgentControl::Stub> AgentLogReader::Stub(const std::string& node,
                                                              const std::string& address) {
  absl::MutexLock lock(&mu_);
  auto& stub = stubs_[node + "@" + address];
  if (!stub) {
    grpc::ChannelArguments args;  // and a moved agent's name is looked up again soon
    args.SetInt(GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS, 500);
    stub = rpc::AgentControl::NewStub(MakeAgentChannel(node, address, agent_tls_, args));
  }
  return stub;
}

}  // namespace athanor::coord
