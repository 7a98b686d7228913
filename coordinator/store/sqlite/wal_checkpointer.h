// WalCheckpointer: copies the state database's write-ahead log back into the
// database on a thread and connection of its own, so that the committer's
// transactions never wait for it.
//
// SQLite's automatic checkpoint runs inside the commit that crosses its
// threshold: that commit copies a thousand pages and fsyncs the database
// before its callers are answered. SqliteStore turns it off and calls Request()
// instead once the log is long enough; this class then runs a PASSIVE
// checkpoint (it never blocks the writer and the writer never blocks it).
//
// The writer starts the log over from its beginning only when a transaction
// begins with every frame copied; under a steady stream of commits a pass
// never catches up with the frames written while it ran. So SqliteStore copies
// that remainder itself, inside a commit, once a pass has copied the bulk.
//
// Thread-safe. Errors are logged and counted; the log then grows until a
// later checkpoint succeeds (SqliteStore checkpoints inline past a hard cap).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

struct sqlite3;

namespace athanor::coord {

class WalCheckpointer {
 public:
  // Opens its own connection to the database at `path` (already in WAL mode).
  static absl::StatusOr<std::unique_ptr<WalCheckpointer>> Start(const std::string& path);
  ~WalCheckpointer();  // finishes a checkpoint in progress, then stops
  WalCheckpointer(const WalCheckpointer&) = delete;
  WalCheckpointer& operator=(const WalCheckpointer&) = delete;

  // Asks for a checkpoint; returns at once. Requests made while one is
  // pending coalesce; one made while a checkpoint runs gets another after it.
  void Request();

  // Blocks until no checkpoint is pending or running (tests, shutdown).
  void WaitIdle();

  struct Stats {
    bool busy = false;         // a checkpoint is pending or running
    uint64_t passes = 0;       // finished, whatever their outcome
    uint64_t checkpoints = 0;  // passes that returned OK
    uint64_t failures = 0;     // passes SQLite refused (busy, I/O error)
    // After the newest pass: frames in the log, and how many of them are in
    // the database now (both 0 when it failed).
    int last_log_frames = 0;
    int last_checkpointed_frames = 0;
  };
  Stats stats() const;

 private:
  explicit WalCheckpointer(sqlite3* db);
  void Loop();

  sqlite3* const db_;  // owned; used by the thread only after Start
  mutable absl::Mutex mu_;
  bool requested_ ABSL_GUARDED_BY(mu_) = false;
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  Stats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace athanor::coord
