// A channel from the coordinator to one node's agent (AgentControl,
// AgentInteractive): mutual TLS with the agents' material, the peer checked
// as that node's agent; plaintext when `agent_tls` is null. Reconnects fast,
// so that a restarted agent is reachable again quickly.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "security/tls.h"

namespace athanor::coord {

// `args`: the caller's own channel arguments, added to.
std::shared_ptr<grpc::Channel> MakeAgentChannel(const std::string& node, const std::string& address,
                                                const security::TlsMaterial* agent_tls,
                                                grpc::ChannelArguments args = {});

}  // namespace athanor::coord
