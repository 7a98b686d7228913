#include "coordinator/rpc/agent_channel.h"

#include "security/cluster_ca.h"

namespace athanor::coord {

std::shared_ptr<grpc::Channel> MakeAgentChannel(const std::string& node, const std::string& address,
                                                const security::TlsMaterial* agent_tls,
                                                grpc::ChannelArguments args) {
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  std::shared_ptr<grpc::ChannelCredentials> creds =
      agent_tls == nullptr ? grpc::InsecureChannelCredentials()
                           : security::ClientCredentials(*agent_tls, security::AgentName(node), "", &args);
  return grpc::CreateCustomChannel(address, creds, args);
}

}  // namespace athanor::coord
