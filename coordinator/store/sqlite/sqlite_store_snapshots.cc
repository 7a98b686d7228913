// SqliteStore's `snapshots` table: one row per instance snapshot id, the
// record as protobuf JSON (rpc::InstanceSnapshot), written or deleted in the
// order the changes came, inside Commit's transaction.
#include <sqlite3.h>

#include "absl/strings/str_cat.h"
#include "coordinator/store/record_codec.h"
#include "coordinator/store/sqlite/sqlite_store.h"

namespace athanor::coord {

absl::Status SqliteStore::PutSnapshots(const std::vector<SnapshotChange>& snapshots) {
  if (snapshots.empty()) return absl::OkStatus();
  sqlite3_stmt* put = nullptr;
  sqlite3_stmt* del = nullptr;
  sqlite3_prepare_v2(db_, "INSERT OR REPLACE INTO snapshots (id, record) VALUES (?, ?)", -1, &put, nullptr);
  sqlite3_prepare_v2(db_, "DELETE FROM snapshots WHERE id = ?", -1, &del, nullptr);
  absl::Status out;
  if (put == nullptr || del == nullptr) out = absl::InternalError("prepare snapshots");
  for (size_t i = 0; out.ok() && i < snapshots.size(); ++i) {
    const rpc::InstanceSnapshot& row = snapshots[i].snapshot;
    sqlite3_stmt* stmt = snapshots[i].removed ? del : put;
    sqlite3_reset(stmt);
    sqlite3_bind_text(stmt, 1, row.id().data(), static_cast<int>(row.id().size()), SQLITE_TRANSIENT);
    if (!snapshots[i].removed) {
      const std::string text = EncodeBillingRow(row);
      sqlite3_bind_text(stmt, 2, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
    }
    if (sqlite3_step(stmt) != SQLITE_DONE) {
      out = absl::InternalError(absl::StrCat(snapshots[i].removed ? "delete" : "write", " snapshot ", row.id()));
    }
  }
  sqlite3_finalize(put);
  sqlite3_finalize(del);
  return out;
}

}  // namespace athanor::coord
