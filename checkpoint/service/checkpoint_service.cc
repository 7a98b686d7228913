#include "checkpoint/service/checkpoint_service.h"
#include "checkpoint/service/service_area.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/service/wire.h"
#include "common/escape.h"
#include "common/logging.h"
#include "common/status.h"

namespace athanor::ckptsvc {
namespace {

constexpr int kSendTimeoutSeconds = 30;

// "job J step S rank R of W attempt A" (the .handoff note) into `event`.
bool ParseHandoffNote(const std::string& note, ShardUploadEvent* event) {
  std::istringstream in(note);
  std::string job_word, step_word, rank_word, of_word, attempt_word;
  in >> job_word >> event->job >> step_word >> event->step >> rank_word >> event->rank >> of_word >>
      event->world_size >> attempt_word >> event->attempt;
  return !in.fail() && job_word == "job" && step_word == "step" && rank_word == "rank" &&
         of_word == "of" && attempt_word == "attempt" && !event->job.empty();
}

}  // namespace

absl::StatusOr<std::unique_ptr<CheckpointService>> CheckpointService::Start(
    CheckpointServiceOptions options, DurableReporter* reporter, StoreOpener opener) {
  if (options.staging_dir.empty() || options.socket_path.empty() || options.registry_dir.empty()) {
    return absl::InvalidArgumentError(
        "the checkpoint service needs a socket path, a staging dir and the agent's rank registry");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<RankRegistry> registry, RankRegistry::Open(options.registry_dir));
  if (::mkdir(options.staging_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::FailedPreconditionError(
        absl::StrCat("creating ", options.staging_dir, ": ", strerror(errno)));
  }
  // Leftovers of an earlier run: that run's uploads are gone with it.
  if (DIR* d = ::opendir(options.staging_dir.c_str())) {
    std::vector<std::string> names;
    while (struct dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    ::closedir(d);
    for (const std::string& name : names) {
      std::string path = absl::StrCat(options.staging_dir, "/", name);
      if (absl::EndsWith(name, ".handoff")) {
        std::ifstream in(path);
        std::string what((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        ATHANOR_LOG(WARNING) << "discarding a handed-off staging area whose upload an earlier "
                                "run of the service did not finish ("
                             << EscapeControls(what) << "); that step will not commit";
        ShardUploadEvent event;
        event.failed = true;
        event.error = "the checkpoint service restarted before the upload finished";
        if (ParseHandoffNote(what, &event)) {
          if (absl::Status r = reporter->ShardUpload(event); !r.ok()) {
            ATHANOR_LOG(WARNING) << "reporting the discarded upload failed: " << EscapeControls(r.ToString());
          }
        }
      }
      ::unlink(path.c_str());
    }
  }
  ASSIGN_OR_RETURN(int fd, ListenService(options.socket_path, 0666));
  return std::unique_ptr<CheckpointService>(
      new CheckpointService(std::move(options), reporter, std::move(opener), fd, std::move(registry)));
}

CheckpointService::CheckpointService(CheckpointServiceOptions options, DurableReporter* reporter,
                                     StoreOpener opener, int listen_fd, std::unique_ptr<RankRegistry> registry)
    : options_(std::move(options)),
      reporter_(reporter),
      opener_(std::move(opener)),
      listen_fd_(listen_fd),
      registry_(std::move(registry)) {
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

CheckpointService::~CheckpointService() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (auto& c : connections_) ::shutdown(c->fd, SHUT_RDWR);
    cv_.SignalAll();
  }
  ::shutdown(listen_fd_, SHUT_RDWR);
  acceptor_.join();
  ::close(listen_fd_);
  std::vector<std::unique_ptr<Connection>> conns;
  {
    absl::MutexLock lock(&mu_);
    conns.swap(connections_);
  }
  for (auto& c : conns) {
    c->thread.join();
    ::close(c->fd);
  }
  WaitIdle();
  absl::MutexLock lock(&mu_);
  for (auto& [key, area] : areas_) {
    if (area->uploader.joinable()) area->uploader.join();
    if (area->fd >= 0) ::close(area->fd);
  }
  ::unlink(options_.socket_path.c_str());
}

void CheckpointService::WaitIdle() {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const auto& [key, area] : areas_) {
      if (area->uploading) return false;
    }
    return true;
  };
  mu_.Await(absl::Condition(&idle));
}

uint64_t CheckpointService::staged_bytes() const {
  absl::MutexLock lock(&mu_);
  return used_bytes_;
}

void CheckpointService::AcceptLoop() {
  for (;;) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // shut down
    }
    // A rank that never reads its replies cannot hold a thread forever.
    const struct timeval send_timeout = {kSendTimeoutSeconds, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout));
    struct ucred cred = {};
    socklen_t len = sizeof(cred);
    std::string refusal;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      refusal = absl::StrCat("cannot read the peer's credentials: ", strerror(errno));
    }
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) {
        ::close(fd);
        return;
      }
      // Reap connections whose rank has gone.
      for (auto it = connections_.begin(); it != connections_.end();) {
        if ((*it)->done) {
          (*it)->thread.join();
          ::close((*it)->fd);
          it = connections_.erase(it);
        } else {
          ++it;
        }
      }
      if (refusal.empty()) refusal = ConnectionRefusalLocked(cred.uid);
      if (refusal.empty()) {
        auto conn = std::make_unique<Connection>();
        conn->fd = fd;
        conn->uid = cred.uid;
        conn->gid = cred.gid;
        Connection* c = conn.get();
        connections_.push_back(std::move(conn));
        c->thread = std::thread([this, c] { Serve(c); });
        continue;
      }
    }
    ATHANOR_LOG(WARNING) << "checkpoint service: refusing a connection from uid " << cred.uid
                         << " (pid " << cred.pid << "): " << refusal;
    // A fresh socket's buffer takes this small frame without blocking; an
    // error in sending changes nothing, the connection is closed either way.
    SendFrame(fd, {{"ok", false}, {"error", absl::ResourceExhaustedError(refusal).ToString()}})
        .IgnoreError();
    ::close(fd);
  }
}

std::string CheckpointService::ConnectionRefusalLocked(uid_t uid) {
  int all = 0, mine = 0;
  for (const auto& c : connections_) {
    if (c->done) continue;
    ++all;
    if (c->uid == uid) ++mine;
  }
  if (mine >= options_.max_connections_per_uid) {
    return absl::StrCat("uid ", uid, " already has ", mine,
                        " connections to the checkpoint service (the most one uid may have)");
  }
  if (all >= options_.max_connections) {
    return absl::StrCat("the checkpoint service already serves ", all,
                        " connections (the most it takes)");
  }
  return "";
}

uint64_t CheckpointService::UidBytesLocked(uid_t uid) const {
  uint64_t bytes = 0;
  for (const auto& [key, area] : areas_) {
    if (area->uid == uid) bytes += area->capacity;
  }
  return bytes;
}

absl::Time CheckpointService::ReclaimExpiredLocked(absl::Time now, const Area* except) {
  absl::Time earliest = absl::InfiniteFuture();
  for (auto& [key, area] : areas_) {
    if (area.get() == except || !area->staged || area->uploading) continue;
    const absl::Time expiry = area->granted_at + options_.handoff_timeout;
    if (expiry > now) {
      earliest = std::min(earliest, expiry);
      continue;
    }
    area->reclaimed = absl::StrCat("its staging area was reclaimed: not handed off within ",
                                   absl::FormatDuration(options_.handoff_timeout),
                                   " while other ranks waited for the node's staging budget");
    ATHANOR_LOG(WARNING) << "checkpoint service: rank " << area->rank << " of " << area->job
                         << " (uid " << area->uid << "): " << area->reclaimed;
    area->staged = false;
    ::close(area->fd);
    area->fd = -1;
    used_bytes_ -= area->capacity;
    area->capacity = 0;
    cv_.SignalAll();  // other waiting requests may fit now
  }
  return earliest;
}

void CheckpointService::Serve(Connection* conn) {
  for (;;) {
    absl::StatusOr<Frame> frame = RecvFrame(conn->fd);
    if (!frame.ok()) {
      if (!absl::IsUnavailable(frame.status())) {
        ATHANOR_LOG(WARNING) << "checkpoint service: dropping a rank connection: "
                             << EscapeControls(frame.status().ToString());
      }
      break;
    }
    if (frame->fd >= 0) ::close(frame->fd);  // ranks send none
    const nlohmann::json& msg = frame->msg;
    std::string op = msg.contains("op") && msg["op"].is_string() ? msg["op"].get<std::string>() : "";
    absl::Status s;
    if (op == "stage") {
      s = HandleStage(conn, msg);
    } else if (op == "handoff") {
      s = HandleHandoff(conn, msg);
    } else if (op == "status") {
      bool busy;
      {
        absl::MutexLock lock(&mu_);
        busy = conn->area != nullptr && conn->area->uploading;
      }
      s = SendFrame(conn->fd, {{"ok", true}, {"busy", busy}});
    } else {
      s = SendFrame(conn->fd, {{"ok", false},
                               {"error", absl::StrCat("unknown checkpoint service op '", op, "'")}});
    }
    if (!s.ok()) break;
  }
  ::shutdown(conn->fd, SHUT_RDWR);  // the rank sees EOF now; the fd is closed when reaped
  absl::MutexLock lock(&mu_);
  if (Area* area = conn->area) {
    area->owner = nullptr;
    area->staged = false;
    ReleaseIfUnusedLocked(area);
  }
  conn->area = nullptr;
  conn->done = true;
}

void CheckpointService::ReleaseIfUnusedLocked(Area* area) {
  if (area->owner != nullptr || area->uploading) return;
  if (area->uploader.joinable()) {
    if (area->uploader.get_id() == std::this_thread::get_id()) {
      area->uploader.detach();  // it only returns after this
    } else {
      area->uploader.join();  // done uploading: it is returning
    }
  }
  if (area->fd >= 0) ::close(area->fd);
  used_bytes_ -= area->capacity;
  areas_.erase(area->key);
  cv_.SignalAll();
}

}  // namespace athanor::ckptsvc
