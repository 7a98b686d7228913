#include "worker/agent/data_stream.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/coordinator_channel.h"
#include "security/cluster_ca.h"

namespace athanor::agent {

std::shared_ptr<grpc::Channel> CoordinatorDataChannel(const std::string& coordinator,
                                                      const std::optional<security::TlsMaterial>& tls) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, 4 << 20);
  std::shared_ptr<grpc::ChannelCredentials> creds =
      tls ? security::ClientCredentials(*tls, security::kCoordinatorName, "", &args)
          : grpc::InsecureChannelCredentials();
  // A list: the one that leads (common/coordinator_targets.h).
  std::string target = CoordinatorDialTarget(coordinator, &args).value_or(coordinator);
  return grpc::CreateCustomChannel(target, creds, args);
}

absl::Status FromGrpc(const grpc::Status& s, absl::string_view what) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), absl::StrCat(what, ": ", s.error_message()));
}

absl::StatusOr<int> OpenToSend(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return absl::InternalError(absl::StrCat("open ", path, ": ", strerror(errno)));
  return fd;
}

absl::StatusOr<int> CreateToReceive(const std::string& path) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat("create ", path, ": ", strerror(errno)));
  return fd;
}

absl::StatusOr<size_t> ReadPiece(int fd, std::string* buf, const std::string& path) {
  for (;;) {
    ssize_t n = read(fd, buf->data(), buf->size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::InternalError(absl::StrCat("read ", path, ": ", strerror(errno)));
    return static_cast<size_t>(n);
  }
}

absl::Status WriteAll(int fd, absl::string_view data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::InternalError(absl::StrCat("write ", path, ": ", strerror(errno)));
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status CloseFile(int fd, const std::string& path) {
  if (close(fd) != 0) return absl::InternalError(absl::StrCat("close ", path, ": ", strerror(errno)));
  return absl::OkStatus();
}

}  // namespace athanor::agent
