#include "worker/agent/agent_control_service.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "security/tls.h"
#include "worker/agent/rank_supervisor.h"

namespace athanor::agent {

grpc::Status AgentControlService::ReadLog(grpc::ServerContext* ctx, const rpc::ReadLogRequest* req,
                                          rpc::ReadLogResponse* resp) {
  if (coordinator_only_ &&
      (ctx->auth_context() == nullptr || !security::PeerIsCoordinator(*ctx->auth_context()))) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "ReadLog is for the coordinator only (its certificate)");
  }
  absl::StatusOr<std::string> path =
      RankSupervisor::LogPath(work_dir_, RankKey{req->job_id(), req->attempt(), req->rank()});
  if (!path.ok()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(path.status().message()));
  }
  int64_t max_bytes = req->max_bytes() <= 0 ? (1 << 20) : std::min<int64_t>(req->max_bytes(), 4 << 20);
  int fd = open(path->c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("no log for job ", req->job_id(), " attempt ", req->attempt(),
                                     " rank ", req->rank(), " on this node"));
  }
  struct stat st {};
  fstat(fd, &st);
  off_t start = st.st_size > max_bytes ? st.st_size - max_bytes : 0;
  std::string data(static_cast<size_t>(st.st_size - start), '\0');
  ssize_t n = pread(fd, data.data(), data.size(), start);
  close(fd);
  data.resize(n > 0 ? static_cast<size_t>(n) : 0);
  resp->set_data(std::move(data));
  return grpc::Status::OK;
}

}  // namespace athanor::agent
