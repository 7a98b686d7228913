#include "coordinator/store/sqlite/wal_checkpointer.h"

#include <sqlite3.h>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace athanor::coord {

absl::StatusOr<std::unique_ptr<WalCheckpointer>> WalCheckpointer::Start(const std::string& path) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    absl::Status s = absl::UnavailableError(absl::StrCat(
        "cannot open state database ", path, " for checkpoints: ", db ? sqlite3_errmsg(db) : "out of memory"));
    sqlite3_close(db);
    return s;
  }
  // The checkpoint fsyncs the log before copying it and the database after,
  // as the writer's own automatic checkpoint did.
  char* err = nullptr;
  if (sqlite3_exec(db, "PRAGMA synchronous=FULL", nullptr, nullptr, &err) != SQLITE_OK) {
    absl::Status s = absl::InternalError(absl::StrCat("sqlite: ", err ? err : "error", " in PRAGMA synchronous"));
    sqlite3_free(err);
    sqlite3_close(db);
    return s;
  }
  return std::unique_ptr<WalCheckpointer>(new WalCheckpointer(db));
}

WalCheckpointer::WalCheckpointer(sqlite3* db) : db_(db) {
  thread_ = std::thread([this] { Loop(); });
}

WalCheckpointer::~WalCheckpointer() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
  sqlite3_close(db_);
}

void WalCheckpointer::Request() {
  absl::MutexLock lock(&mu_);
  requested_ = true;
}

void WalCheckpointer::WaitIdle() {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || (!requested_ && !running_); };
  mu_.Await(absl::Condition(&idle));
}

WalCheckpointer::Stats WalCheckpointer::stats() const {
  absl::MutexLock lock(&mu_);
  Stats out = stats_;
  out.busy = requested_ || running_;
  return out;
}

void WalCheckpointer::Loop() {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || requested_; };
      mu_.Await(absl::Condition(&ready));
      if (stop_) return;
      requested_ = false;
      running_ = true;
    }
    int log_frames = 0;
    int checkpointed = 0;
    const int rc = sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, &log_frames, &checkpointed);
    if (rc != SQLITE_OK) {
      ATHANOR_LOG(WARNING) << "state database checkpoint failed: " << sqlite3_errmsg(db_)
                           << " (the log grows until a later one succeeds)";
    }
    absl::MutexLock lock(&mu_);
    running_ = false;
    ++stats_.passes;
    if (rc == SQLITE_OK) {
      ++stats_.checkpoints;
      stats_.last_log_frames = log_frames;
      stats_.last_checkpointed_frames = checkpointed;
    } else {
      ++stats_.failures;
      stats_.last_log_frames = 0;
      stats_.last_checkpointed_frames = 0;
    }
  }
}

}  // namespace athanor::coord
