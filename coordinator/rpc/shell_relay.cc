#include "coordinator/rpc/shell_relay.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "coordinator/rpc/agent_channel.h"

namespace athanor::coord {
namespace {

constexpr size_t kMaxData = 64 << 10;  // bytes a ShellInput or ShellOutput carries

}  // namespace

std::shared_ptr<rpc::AgentInteractive::Stub> AgentInteractiveChannels::Stub(const std::string& node,
                                                                             const std::string& address) {
  absl::MutexLock lock(&mu_);
  auto& stub = stubs_[node + "@" + address];
  if (!stub) {
    stub = rpc::AgentInteractive::NewStub(MakeAgentChannel(node, address, agent_tls_));
  }
  return stub;
}

grpc::Status RelayShell(grpc::ServerContext* client_ctx,
                        grpc::ServerReaderWriter<rpc::ShellOutput, rpc::ShellInput>* client,
                        rpc::AgentInteractive::Stub* agent, const rpc::ShellOpen& open,
                        const std::function<void()>& on_input) {
  grpc::ClientContext agent_ctx;
  agent_ctx.set_wait_for_ready(false);
  std::unique_ptr<grpc::ClientReaderWriter<rpc::ShellInput, rpc::ShellOutput>> agent_stream = agent->Shell(&agent_ctx);
  rpc::ShellInput first;
  *first.mutable_open() = open;
  rpc::ShellOutput out;
  // The agent answers an empty output once the command runs, or its error.
  if (!agent_stream->Write(first) || !agent_stream->Read(&out)) {
    agent_stream->WritesDone();
    grpc::Status s = agent_stream->Finish();
    if (s.ok()) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the agent closed the shell at once");
    return grpc::Status(s.error_code(), absl::StrCat("the node's agent: ", s.error_message().substr(0, 1024)));
  }
  absl::Notification input_done;
  std::thread input([&] {
    rpc::ShellInput in;
    while (client->Read(&in)) {
      if (in.data().size() > kMaxData) break;  // a misbehaving client: hang up
      in.clear_open();
      if (!in.data().empty()) on_input();
      if (!agent_stream->Write(in)) break;
    }
    agent_stream->WritesDone();  // the agent hangs up a command still running
    input_done.Notify();
  });
  bool client_there = true;
  bool exited = false;
  while (agent_stream->Read(&out)) {
    if (out.data().size() > kMaxData) out.mutable_data()->resize(kMaxData);
    exited = exited || out.exited();
    if (client_there && (!out.data().empty() || !out.notice().empty() || out.exited())) {
      client_there = client->Write(out);
      if (!client_there) agent_ctx.TryCancel();  // the agent hangs the command up
    }
  }
  // The client closes its side once it has the exit; one that does not is cut off.
  if (!input_done.WaitForNotificationWithTimeout(absl::Seconds(exited ? 5 : 1))) client_ctx->TryCancel();
  input.join();
  grpc::Status s = agent_stream->Finish();
  if (!exited && !s.ok()) {
    return grpc::Status(s.error_code(), absl::StrCat("the node's agent: ", s.error_message().substr(0, 1024)));
  }
  return grpc::Status::OK;
}

}  // namespace athanor::coord
