// Durable store of the coordinator's jobs and nodes: one SQLite database in
// WAL mode (synchronous=FULL), one JSON row per record (record_codec.h).
//
// Commit() writes a batch of changed records in one transaction; when it
// returns OK the batch survives kill -9 of the process. Not thread-safe: the
// owner (CoordinatorCore) serialises calls. Errors are Internal/Unavailable
// with SQLite's message.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/cluster_state.h"

struct sqlite3;

namespace athanor::coord {

class JobStore {
 public:
  static absl::StatusOr<std::unique_ptr<JobStore>> Open(const std::string& path);
  ~JobStore();
  JobStore(const JobStore&) = delete;
  JobStore& operator=(const JobStore&) = delete;

  absl::Status Commit(const Changes& changes);

  struct Contents {
    std::vector<JobRecord> jobs;  // by seq
    std::vector<NodeRecord> nodes;
    std::map<std::string, int32_t> quotas;  // set by `athanor quota`; < 0: removed
  };
  absl::StatusOr<Contents> LoadAll();

  // "wal" once opened; for tests and diagnostics.
  absl::StatusOr<std::string> JournalMode();

 private:
  explicit JobStore(sqlite3* db) : db_(db) {}
  absl::Status Exec(const std::string& sql);
  sqlite3* db_;  // owned
};

}  // namespace athanor::coord
