// The coordinator's side of a shell (Interactive.Shell, interactive_service.cc):
// the agents' AgentInteractive stubs, one channel per agent (mutual TLS,
// expecting the node's certificate, as agent_logs.h), and the relay of one
// shell between the client's stream and its agent's.
//
// Thread-safe. `agent_tls` (null: plain channels, --insecure) is not owned
// and outlives this.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/athanor_interactive.grpc.pb.h"
#include "security/tls.h"

namespace athanor::coord {

class AgentInteractiveChannels {
 public:
  explicit AgentInteractiveChannels(const security::TlsMaterial* agent_tls) : agent_tls_(agent_tls) {}
  // The agent of `node` at `address`.
  std::shared_ptr<rpc::AgentInteractive::Stub> Stub(const std::string& node, const std::string& address);

 private:
  const security::TlsMaterial* const agent_tls_;
  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<rpc::AgentInteractive::Stub>> stubs_ ABSL_GUARDED_BY(mu_);
};

// Relays one shell: `open` (already checked and completed) goes to the
// agent first; then the client's input goes to the agent (on a thread of its
// own; `on_input` is called for each input that carries bytes) and the
// agent's output to the client, until the command has exited or either side
// has gone. Returns the agent's error when it refused the shell.
grpc::Status RelayShell(grpc::ServerContext* client_ctx,
                        grpc::ServerReaderWriter<rpc::ShellOutput, rpc::ShellInput>* client,
                        rpc::AgentInteractive::Stub* agent, const rpc::ShellOpen& open,
                        const std::function<void()>& on_input);

}  // namespace athanor::coord
