#include "coordinator/rpc/notebook_sessions.h"

#include <openssl/rand.h>

#include "absl/strings/escaping.h"

namespace athanor::coord {

absl::StatusOr<std::string> NotebookSessions::Create(const HttpCaller& caller, int64_t now_unix) {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    return absl::InternalError("notebook login: OpenSSL's RAND_bytes could not make a session id");
  }
  std::string id = absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(bytes), sizeof(bytes)));
  absl::MutexLock lock(&mu_);
  if (sessions_.size() >= kMaxSessions) {
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      it = it->second.expires_unix <= now_unix ? sessions_.erase(it) : std::next(it);
    }
  }
  if (sessions_.size() >= kMaxSessions) {  // all live: the one that ends first goes
    auto oldest = sessions_.begin();
    for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
      if (it->second.expires_unix < oldest->second.expires_unix) oldest = it;
    }
    sessions_.erase(oldest);
  }
  sessions_[id] = {caller, now_unix + ttl_s_};
  return id;
}

std::optional<HttpCaller> NotebookSessions::Find(const std::string& id, int64_t now_unix) const {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second.expires_unix <= now_unix) return std::nullopt;
  return it->second.caller;
}

}  // namespace athanor::coord
