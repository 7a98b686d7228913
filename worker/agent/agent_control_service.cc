#include "worker/agent/agent_control_service.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "common/escape.h"
#include "common/logging.h"
#include "security/tls.h"
#include "worker/agent/rank_log.h"
#include "worker/agent/rank_supervisor.h"

namespace athanor::agent {

grpc::Status AgentControlService::ReadLog(grpc::ServerContext* ctx, const rpc::ReadLogRequest* req,
                                          rpc::ReadLogResponse* resp) {
  if (coordinator_only_ &&
      (ctx->auth_context() == nullptr || !security::PeerIsCoordinator(*ctx->auth_context()))) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "ReadLog is for the coordinator only (its certificate)");
  }
  const RankKey key{req->job_id(), req->attempt(), req->rank()};
  absl::StatusOr<std::string> path = RankSupervisor::LogPath(work_dir_, key);
  if (!path.ok()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(path.status().message()));
  }
  int64_t max_bytes = req->max_bytes() <= 0 ? (1 << 20) : std::min<int64_t>(req->max_bytes(), 4 << 20);
  // From the work dir, never through a link planted in place of the log.
  absl::StatusOr<int> opened = OpenRankLogForRead(work_dir_, key);
  if (absl::IsNotFound(opened.status())) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("no log for job ", req->job_id(), " attempt ", req->attempt(),
                                     " rank ", req->rank(), " on this node"));
  }
  if (!opened.ok()) {
    ATHANOR_LOG(WARNING) << "ReadLog: " << EscapeControls(opened.status().message());
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat("the log of job ", req->job_id(), " attempt ", req->attempt(), " rank ",
                                     req->rank(), " on this node cannot be read: it is not a regular file of "
                                     "the agent's (a link planted in its place is not followed)"));
  }
  const int fd = *opened;
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
