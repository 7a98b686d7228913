#include "coordinator/observability/metrics_rpc.h"

#include <chrono>
#include <string>

namespace athanor::coord {
namespace {

using grpc::experimental::InterceptionHookPoints;

class RpcTimer final : public grpc::experimental::Interceptor {
 public:
  RpcTimer(const char* method, CoordinatorMetrics* metrics)
      : metrics_(metrics), start_(std::chrono::steady_clock::now()) {
    std::string m = method != nullptr ? method : "";
    method_ = m.substr(m.rfind('/') + 1);  // "/athanor.rpc.Coordinator/SubmitJob" -> "SubmitJob"
  }
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      metrics_->ObserveRpc(method_, GrpcCodeName(methods->GetSendStatus().error_code()), s);
    }
    methods->Proceed();
  }

 private:
  CoordinatorMetrics* const metrics_;
  const std::chrono::steady_clock::time_point start_;
  std::string method_;
};

class Factory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit Factory(CoordinatorMetrics* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new RpcTimer(info->method(), metrics_);  // gRPC owns it
  }

 private:
  CoordinatorMetrics* const metrics_;
};

}  // namespace

const char* GrpcCodeName(int code) {
  static const char* kNames[] = {"OK",
                                 "CANCELLED",
                                 "UNKNOWN",
                                 "INVALID_ARGUMENT",
                                 "DEADLINE_EXCEEDED",
                                 "NOT_FOUND",
                                 "ALREADY_EXISTS",
                                 "PERMISSION_DENIED",
                                 "RESOURCE_EXHAUSTED",
                                 "FAILED_PRECONDITION",
                                 "ABORTED",
                                 "OUT_OF_RANGE",
                                 "UNIMPLEMENTED",
                                 "INTERNAL",
                                 "UNAVAILABLE",
                                 "DATA_LOSS",
                                 "UNAUTHENTICATED"};
  return code >= 0 && code < 17 ? kNames[code] : "UNKNOWN";
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> RpcMetricsInterceptor(
    CoordinatorMetrics* metrics) {
  return std::make_unique<Factory>(metrics);
}

}  // namespace athanor::coord
