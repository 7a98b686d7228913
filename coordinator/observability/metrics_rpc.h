// A gRPC server interceptor that times every call the coordinator serves
// (callback and synchronous alike) into athanor_rpc_duration_seconds by
// method and status code. The metrics object is not owned and must outlive
// the server.
#pragma once

#include <memory>

#include <grpcpp/support/server_interceptor.h>

#include "coordinator/observability/metrics_registry.h"

namespace athanor::coord {

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> RpcMetricsInterceptor(
    CoordinatorMetrics* metrics);

// "OK", "CANCELLED", ... ("UNKNOWN" for codes outside the canonical 17).
const char* GrpcCodeName(int code);

}  // namespace athanor::coord
