// NotebookSessions: the notebook proxy's logins (notebook_proxy.h). A tenant
// logs in once with its bearer token (POST /notebook-login); the proxy hands
// the browser a session id in a cookie, and maps it here, in memory only, to
// the caller's tenant and role until it expires. A coordinator restart ends
// every session (the browser logs in again).
//
// Ids are 32 random bytes (OpenSSL RAND_bytes) in hex. At most kMaxSessions
// live at once: past that, expired ones are dropped first, then the oldest.
// Thread-safe: one mutex; no callbacks.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/http_server.h"

namespace athanor::coord {

class NotebookSessions {
 public:
  static constexpr size_t kMaxSessions = 10000;

  explicit NotebookSessions(int64_t ttl_s) : ttl_s_(ttl_s) {}

  // A new session for `caller` from `now_unix`; Internal when no random
  // bytes could be had.
  absl::StatusOr<std::string> Create(const HttpCaller& caller, int64_t now_unix);
  // The caller of a live session; nullopt when unknown or expired.
  std::optional<HttpCaller> Find(const std::string& id, int64_t now_unix) const;
  int64_t ttl_s() const { return ttl_s_; }

 private:
  struct Session {
    HttpCaller caller;
    int64_t expires_unix = 0;
  };
  const int64_t ttl_s_;
  mutable absl::Mutex mu_;
  std::map<std::string, Session> sessions_ ABSL_GUARDED_BY(mu_);
};

}  // namespace athanor::coord
