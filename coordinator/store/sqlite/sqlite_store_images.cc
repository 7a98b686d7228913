// SqliteStore's `images` table: one row per (tenant, name), the record as
// protobuf JSON (rpc::Image), written or deleted in the order the changes
// came, inside Commit's transaction.
#include <sqlite3.h>

#include "absl/strings/str_cat.h"
#include "coordinator/store/record_codec.h"
#include "coordinator/store/sqlite/sqlite_store.h"

namespace athanor::coord {
namespace {

void BindText(sqlite3_stmt* stmt, int i, const std::string& text) {
  sqlite3_bind_text(stmt, i, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
}

}  // namespace

absl::Status SqliteStore::PutImages(const std::vector<ImageChange>& images) {
  if (images.empty()) return absl::OkStatus();
  sqlite3_stmt* put = nullptr;
  sqlite3_stmt* del = nullptr;
  sqlite3_prepare_v2(db_, "INSERT OR REPLACE INTO images (tenant, name, record) VALUES (?, ?, ?)", -1, &put,
                     nullptr);
  sqlite3_prepare_v2(db_, "DELETE FROM images WHERE tenant = ? AND name = ?", -1, &del, nullptr);
  absl::Status out;
  if (put == nullptr || del == nullptr) out = absl::InternalError("prepare images");
  for (size_t i = 0; out.ok() && i < images.size(); ++i) {
    const rpc::Image& image = images[i].image;
    sqlite3_stmt* stmt = images[i].removed ? del : put;
    sqlite3_reset(stmt);
    BindText(stmt, 1, image.tenant());
    BindText(stmt, 2, image.name());
    if (!images[i].removed) BindText(stmt, 3, EncodeBillingRow(image));
    if (sqlite3_step(stmt) != SQLITE_DONE) {
      out = absl::InternalError(absl::StrCat(images[i].removed ? "delete" : "write", " image ", image.tenant(),
                                             "/", image.name()));
    }
  }
  sqlite3_finalize(put);
  sqlite3_finalize(del);
  return out;
}

}  // namespace athanor::coord
