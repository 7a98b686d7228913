// SqliteStore: the Store (store/store.h) as one SQLite database in WAL mode
// (synchronous=FULL), one JSON row per record (store/record_codec.h;
// rows of older releases are rewritten once, at open: store/legacy_rows.h).
//
// Commit() writes a batch of changed records in one transaction; when it
// returns OK the batch survives kill -9 of the process. Not thread-safe: the
// owner (the GroupCommitter's thread) serialises calls. Errors are
// Internal/Unavailable with SQLite's message.
//
// The write-ahead log is copied back into the database by a WalCheckpointer
// of the store's own, off the committing thread, once it holds
// `checkpoint_frames` pages. Once a pass has copied all but `finish_frames`
// of them, the next commit copies the rest itself, so that the one after it
// starts the log over; only a log that outgrows `inline_frames` (the
// checkpointer failing or far behind) is checkpointed whole inside a commit.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <google/protobuf/message.h>

#include "absl/status/statusor.h"
#include "coordinator/store/store.h"

struct sqlite3;
struct sqlite3_stmt;

namespace athanor::coord {

class WalCheckpointer;

class SqliteStore final : public Store {
 public:
  struct WalOptions {
    int checkpoint_frames = 1000;  // SQLite's own automatic threshold
    int inline_frames = 16000;     // about 64 MiB of 4 KiB pages
    int finish_frames = 250;
    // false: SQLite's automatic checkpoint inside the commit that reaches
    // checkpoint_frames, and no checkpointer (the baseline of
    // athanor-bench-store).
    bool background = true;
  };
  static absl::StatusOr<std::unique_ptr<SqliteStore>> Open(const std::string& path);
  static absl::StatusOr<std::unique_ptr<SqliteStore>> Open(const std::string& path, WalOptions wal);
  ~SqliteStore() override;
  SqliteStore(const SqliteStore&) = delete;
  SqliteStore& operator=(const SqliteStore&) = delete;

  absl::Status Commit(const Changes& changes) override;
  absl::StatusOr<Contents> LoadAll() override;
  StoreLog log() const override;

  // "wal" once opened; for tests and diagnostics.
  absl::StatusOr<std::string> JournalMode();

  struct WalStats {
    int log_frames = 0;             // in the log after the newest commit
    int max_log_frames = 0;         // the most it held after any commit
    uint64_t requests = 0;          // commits that asked the checkpointer
    uint64_t finishes = 0;          // commits that copied a pass's remainder
    uint64_t inline_checkpoints = 0;  // commits that copied a log past inline_frames
    uint64_t restarts = 0;          // commits that started the log over
    uint64_t checkpointer_passes = 0;  // the checkpointer's, finished
  };
  WalStats wal_stats() const;
  // The store's checkpointer (null without `background`); for tests and
  // diagnostics.
  WalCheckpointer* checkpointer() { return checkpointer_.get(); }

 private:
  SqliteStore(sqlite3* db, WalOptions wal);
  absl::Status Exec(const std::string& sql);
  // Rewrites the rows of a database older than the current row format
  // (legacy_rows.h) in one transaction; DataLoss naming a row that does not read.
  absl::Status UpgradeRows();
  // SQLite's hook after each commit, with the frames now in the log.
  static int AfterWalCommit(void* store, sqlite3* db, const char* schema, int frames);
  // Billing's rows: binds the key(s) given, then the row as text, and steps.
  bool PutRow(sqlite3_stmt* stmt, std::optional<std::string> text_key,
              std::optional<int64_t> int_key, const google::protobuf::Message& row);
  // Images' rows, in order (sqlite_store_images.cc); the error names the
  // image whose row failed. Inside Commit's transaction.
  absl::Status PutImages(const std::vector<ImageChange>& images);
  // Volumes' rows, likewise (sqlite_store_volumes.cc).
  absl::Status PutVolumes(const std::vector<VolumeChange>& volumes);
  // Instance snapshots' rows, likewise (sqlite_store_snapshots.cc).
  absl::Status PutSnapshots(const std::vector<SnapshotChange>& snapshots);
  // Reads every row of `sql` (one text column) into `out`; DataLoss naming
  // the table and row that does not read.
  template <typename Row>
  absl::Status ReadRows(const char* table, const char* sql, std::vector<Row>* out);

  sqlite3* db_;  // owned
  const WalOptions wal_;
  std::unique_ptr<WalCheckpointer> checkpointer_;  // stopped before db_ closes
  // Written by the hook, on the committing thread:
  WalStats wal_stats_;
  // The pass this store asked for last: the checkpointer's pass count it
  // will finish as, and the log's generation (restarts) it copies.
  uint64_t asked_pass_ = 0;
  uint64_t asked_generation_ = 0;
};

}  // namespace athanor::coord
