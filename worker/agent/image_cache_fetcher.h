// The agent's ImageFetcher: NodeData.FetchImage on the coordinator
// (image_cache.h). Kept apart so that the cache's users need no gRPC.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "security/tls.h"
#include "worker/agent/image_cache.h"

namespace athanor::agent {

// NodeData.FetchImage over a channel of its own to the coordinator (mutual
// TLS with the node's certificate; `tls` nullopt: plaintext). Each Fetch is
// one stream of chunks of at most 1 MiB, written to the file as they come.
std::unique_ptr<ImageFetcher> MakeCoordinatorImageFetcher(const std::string& coordinator,
                                                          const std::optional<security::TlsMaterial>& tls);

}  // namespace athanor::agent
