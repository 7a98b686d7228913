// SqliteStore's `volumes` table: one row per (tenant, name), the record as
// protobuf JSON (rpc::Volume, snapshots included), written or deleted in the
// order the changes came, inside Commit's transaction.
#include <sqlite3.h>

#include "absl/strings/str_cat.h"
#include "coordinator/store/record_codec.h"
#include "coordinator/store/sqlite/sqlite_store.h"

namespace athanor::coord {

absl::Status SqliteStore::PutVolumes(const std::vector<VolumeChange>& volumes) {
  if (volumes.empty()) return absl::OkStatus();
  sqlite3_stmt* put = nullptr;
  sqlite3_stmt* del = nullptr;
  sqlite3_prepare_v2(db_, "INSERT OR REPLACE INTO volumes (tenant, name, record) VALUES (?, ?, ?)", -1, &put,
                     nullptr);
  sqlite3_prepare_v2(db_, "DELETE FROM volumes WHERE tenant = ? AND name = ?", -1, &del, nullptr);
  absl::Status out;
  if (put == nullptr || del == nullptr) out = absl::InternalError("prepare volumes");
  for (size_t i = 0; out.ok() && i < volumes.size(); ++i) {
    rpc::Volume row = volumes[i].volume;
    row.clear_used_by();  // a view, never stored
    sqlite3_stmt* stmt = volumes[i].removed ? del : put;
    sqlite3_reset(stmt);
    sqlite3_bind_text(stmt, 1, row.tenant().data(), static_cast<int>(row.tenant().size()), SQLITE_TRANSIENT);
    sqlite3_bind_text(stmt, 2, row.name().data(), static_cast<int>(row.name().size()), SQLITE_TRANSIENT);
    if (!volumes[i].removed) {
      const std::string text = EncodeBillingRow(row);
      sqlite3_bind_text(stmt, 3, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
    }
    if (sqlite3_step(stmt) != SQLITE_DONE) {
      out = absl::InternalError(absl::StrCat(volumes[i].removed ? "delete" : "write", " volume ", row.tenant(),
                                             "/", row.name()));
    }
  }
  sqlite3_finalize(put);
  sqlite3_finalize(del);
  return out;
}

}  // namespace athanor::coord
