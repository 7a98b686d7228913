#include "coordinator/store/sqlite/sqlite_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <optional>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "coordinator/store/legacy_rows.h"
#include "coordinator/store/record_codec.h"
#include "coordinator/store/sqlite/wal_checkpointer.h"

namespace athanor::coord {
namespace {

// PRAGMA user_version: 0 for the hand-written JSON rows of releases up to
// 0ca114a, 1 for the rows of record_codec.h.
constexpr int kRowFormat = 1;

absl::Status SqliteError(sqlite3* db, const std::string& what) {
  return absl::InternalError(absl::StrCat("sqlite ", what, ": ", sqlite3_errmsg(db)));
}

// Owns one prepared statement.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) { sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr); }
  ~Statement() { sqlite3_finalize(stmt_); }
  sqlite3_stmt* get() const { return stmt_; }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

}  // namespace

absl::StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::string& path) {
  return Open(path, WalOptions());
}

absl::StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::string& path, WalOptions wal) {
  if (wal.checkpoint_frames < 1 || wal.inline_frames < wal.checkpoint_frames || wal.finish_frames < 0 ||
      wal.finish_frames > wal.checkpoint_frames) {
    return absl::InvalidArgumentError(absl::StrCat(
        "state database log thresholds: checkpoint_frames ", wal.checkpoint_frames, ", inline_frames ",
        wal.inline_frames, ", finish_frames ", wal.finish_frames,
        " (want 1 <= checkpoint_frames <= inline_frames and 0 <= finish_frames <= checkpoint_frames)"));
  }
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    absl::Status s = absl::UnavailableError(
        absl::StrCat("cannot open state database ", path, ": ", db ? sqlite3_errmsg(db) : "out of memory"));
    sqlite3_close(db);
    return s;
  }
  sqlite3_busy_timeout(db, 5000);
  std::unique_ptr<SqliteStore> store(new SqliteStore(db, wal));
  RETURN_IF_ERROR(store->Exec("PRAGMA journal_mode=WAL"));
  RETURN_IF_ERROR(store->Exec("PRAGMA synchronous=FULL"));
  RETURN_IF_ERROR(store->Exec(
      "CREATE TABLE IF NOT EXISTS jobs (seq INTEGER PRIMARY KEY, record TEXT NOT NULL);"
      "CREATE TABLE IF NOT EXISTS nodes (name TEXT PRIMARY KEY, record TEXT NOT NULL);"
      "CREATE TABLE IF NOT EXISTS quotas (tenant TEXT PRIMARY KEY, gpus INTEGER NOT NULL);"
      "CREATE TABLE IF NOT EXISTS prices (model TEXT NOT NULL, effective INTEGER NOT NULL,"
      " record TEXT NOT NULL, PRIMARY KEY (model, effective));"
      "CREATE TABLE IF NOT EXISTS plans (tenant TEXT PRIMARY KEY, record TEXT NOT NULL);"
      // Append-only: a repeated id fails the whole commit.
      "CREATE TABLE IF NOT EXISTS ledger (id INTEGER PRIMARY KEY, record TEXT NOT NULL);"
      "CREATE TABLE IF NOT EXISTS images (tenant TEXT NOT NULL, name TEXT NOT NULL,"
      " record TEXT NOT NULL, PRIMARY KEY (tenant, name));"
      "CREATE TABLE IF NOT EXISTS volumes (tenant TEXT NOT NULL, name TEXT NOT NULL,"
      " record TEXT NOT NULL, PRIMARY KEY (tenant, name));"
      "CREATE TABLE IF NOT EXISTS snapshots (id TEXT PRIMARY KEY, record TEXT NOT NULL);"));
  RETURN_IF_ERROR(store->UpgradeRows());
  // The schema and any rewritten rows go into the database file now, so the
  // log starts empty and its thresholds count commits' pages only.
  if (sqlite3_wal_checkpoint_v2(db, nullptr, SQLITE_CHECKPOINT_TRUNCATE, nullptr, nullptr) != SQLITE_OK) {
    return SqliteError(db, "checkpoint at open");
  }
  ASSIGN_OR_RETURN(std::string mode, store->JournalMode());
  if (mode != "wal") {
    return absl::FailedPreconditionError(
        absl::StrCat("state database ", path, " cannot use WAL (journal_mode=", mode, ")"));
  }
  if (!wal.background) {
    sqlite3_wal_autocheckpoint(db, wal.checkpoint_frames);
    return store;
  }
  ASSIGN_OR_RETURN(store->checkpointer_, WalCheckpointer::Start(path));
  // Replaces SQLite's automatic checkpoint (itself a hook of this kind).
  sqlite3_wal_hook(db, &SqliteStore::AfterWalCommit, store.get());
  return store;
}

SqliteStore::SqliteStore(sqlite3* db, WalOptions wal) : db_(db), wal_(wal) {}

SqliteStore::WalStats SqliteStore::wal_stats() const {
  WalStats out = wal_stats_;
  if (checkpointer_) out.checkpointer_passes = checkpointer_->stats().passes;
  return out;
}

StoreLog SqliteStore::log() const {
  const WalStats wal = wal_stats();
  return StoreLog{wal.log_frames, wal.checkpointer_passes, wal.finishes + wal.inline_checkpoints};
}

SqliteStore::~SqliteStore() {
  if (checkpointer_) sqlite3_wal_hook(db_, nullptr, nullptr);
  checkpointer_.reset();
  sqlite3_close(db_);  // the last connection: SQLite checkpoints and removes the log
}

int SqliteStore::AfterWalCommit(void* arg, sqlite3* db, const char* schema, int frames) {
  SqliteStore* store = static_cast<SqliteStore*>(arg);
  const WalOptions& wal = store->wal_;
  WalStats& stats = store->wal_stats_;
  if (frames < stats.log_frames) ++stats.restarts;  // this commit started the log over
  stats.log_frames = frames;
  stats.max_log_frames = std::max(stats.max_log_frames, frames);
  if (frames < wal.checkpoint_frames) return SQLITE_OK;
  WalCheckpointer& checkpointer = *store->checkpointer_;
  const WalCheckpointer::Stats done = checkpointer.stats();
  if (done.busy) return SQLITE_OK;  // a later commit looks at its pass
  // The pass asked for last has finished on this log: how far behind it is.
  const bool ours = done.passes >= store->asked_pass_ && store->asked_generation_ == stats.restarts &&
                    done.last_checkpointed_frames > 0;
  const int behind = frames - done.last_checkpointed_frames;
  if (frames >= wal.inline_frames || (ours && behind >= 0 && behind <= wal.finish_frames)) {
    // Either the rest of a pass (a few pages: the next commit then starts
    // the log over), or a log the checkpointer failed to keep short, copied
    // here as SQLite would have.
    ++(frames >= wal.inline_frames ? stats.inline_checkpoints : stats.finishes);
    int log = 0;
    int copied = 0;
    if (sqlite3_wal_checkpoint_v2(db, schema, SQLITE_CHECKPOINT_PASSIVE, &log, &copied) != SQLITE_OK) {
      ATHANOR_LOG(WARNING) << "state database checkpoint inside a commit failed: " << sqlite3_errmsg(db);
    }
    return SQLITE_OK;  // the commit itself succeeded either way
  }
  ++stats.requests;
  store->asked_pass_ = done.passes + 1;
  store->asked_generation_ = stats.restarts;
  checkpointer.Request();
  return SQLITE_OK;
}

absl::Status SqliteStore::Exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    absl::Status s = absl::InternalError(absl::StrCat("sqlite: ", err ? err : "error", " in ", sql));
    sqlite3_free(err);
    return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> SqliteStore::JournalMode() {
  Statement st(db_, "PRAGMA journal_mode");
  if (st.get() == nullptr || sqlite3_step(st.get()) != SQLITE_ROW) {
    return SqliteError(db_, "journal_mode");
  }
  return std::string(reinterpret_cast<const char*>(sqlite3_column_text(st.get(), 0)));
}

absl::Status SqliteStore::UpgradeRows() {
  RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  auto fail = [&](absl::Status s) {
    Exec("ROLLBACK").IgnoreError();  // nothing was written; the cause is `s`
    return s;
  };
  int version = 0;
  {
    Statement st(db_, "PRAGMA user_version");
    if (st.get() == nullptr || sqlite3_step(st.get()) != SQLITE_ROW) return fail(SqliteError(db_, "user_version"));
    version = sqlite3_column_int(st.get(), 0);
  }
  if (version > kRowFormat) {
    return fail(absl::FailedPreconditionError(absl::StrCat(
        "state database rows are of format ", version, ", newer than this release's ", kRowFormat)));
  }
  if (version == kRowFormat) return Exec("COMMIT");
  std::vector<std::pair<std::string, std::string>> jobs, nodes;  // key, new row
  for (auto [table, key, out] : {std::tuple{"jobs", "seq", &jobs}, std::tuple{"nodes", "name", &nodes}}) {
    Statement read(db_, absl::StrCat("SELECT ", key, ", record FROM ", table).c_str());
    if (read.get() == nullptr) return fail(SqliteError(db_, absl::StrCat("read ", table)));
    int rc;
    while ((rc = sqlite3_step(read.get())) == SQLITE_ROW) {
      std::string id(reinterpret_cast<const char*>(sqlite3_column_text(read.get(), 0)),
                     sqlite3_column_bytes(read.get(), 0));
      std::string_view text(reinterpret_cast<const char*>(sqlite3_column_text(read.get(), 1)),
                            sqlite3_column_bytes(read.get(), 1));
      absl::StatusOr<std::string> row;
      if (out == &jobs) {
        absl::StatusOr<JobRecord> job = DecodeLegacyJob(text);
        row = job.ok() ? absl::StatusOr<std::string>(EncodeJob(*job)) : job.status();
      } else {
        absl::StatusOr<NodeRecord> node = DecodeLegacyNode(text);
        row = node.ok() ? absl::StatusOr<std::string>(EncodeNode(*node)) : node.status();
      }
      if (!row.ok()) {
        return fail(absl::DataLossError(absl::StrCat("state database, ", table, " row ", id, ": ", row.status().message())));
      }
      out->emplace_back(std::move(id), *std::move(row));
    }
    if (rc != SQLITE_DONE) return fail(SqliteError(db_, absl::StrCat("read ", table)));
    Statement write(db_, absl::StrCat("UPDATE ", table, " SET record = ? WHERE ", key, " = ?").c_str());
    if (write.get() == nullptr) return fail(SqliteError(db_, "prepare"));
    for (const auto& [id, text] : *out) {
      sqlite3_reset(write.get());
      sqlite3_bind_text(write.get(), 1, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
      sqlite3_bind_text(write.get(), 2, id.data(), static_cast<int>(id.size()), SQLITE_TRANSIENT);
      if (sqlite3_step(write.get()) != SQLITE_DONE) return fail(SqliteError(db_, absl::StrCat("rewrite ", table, " row ", id)));
    }
  }
  if (absl::Status s = Exec(absl::StrCat("PRAGMA user_version = ", kRowFormat)); !s.ok()) return fail(s);
  return Exec("COMMIT");
}

absl::Status SqliteStore::Commit(const Changes& changes) {
  if (changes.empty()) return absl::OkStatus();
  RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  auto fail = [&](const std::string& what) {
    absl::Status s = SqliteError(db_, what);
    // The write's own error is what the caller needs; a failed ROLLBACK
    // leaves SQLite rolling back on its own (the transaction never commits).
    Exec("ROLLBACK").IgnoreError();
    return s;
  };
  {
    Statement put_job(db_, "INSERT OR REPLACE INTO jobs (seq, record) VALUES (?, ?)");
    if (put_job.get() == nullptr) return fail("prepare");
    for (const JobRecord& job : changes.jobs) {
      std::string text = EncodeJob(job);
      sqlite3_reset(put_job.get());
      sqlite3_bind_int64(put_job.get(), 1, job.seq);
      sqlite3_bind_text(put_job.get(), 2, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
      if (sqlite3_step(put_job.get()) != SQLITE_DONE) return fail(absl::StrCat("write job ", job.id));
    }
    Statement put_node(db_, "INSERT OR REPLACE INTO nodes (name, record) VALUES (?, ?)");
    if (put_node.get() == nullptr) return fail("prepare");
    for (const NodeRecord& node : changes.nodes) {
      std::string text = EncodeNode(node);
      sqlite3_reset(put_node.get());
      sqlite3_bind_text(put_node.get(), 1, node.name.data(), static_cast<int>(node.name.size()),
                        SQLITE_TRANSIENT);
      sqlite3_bind_text(put_node.get(), 2, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
      if (sqlite3_step(put_node.get()) != SQLITE_DONE) {
        return fail(absl::StrCat("write node ", node.name));
      }
    }
    Statement put_quota(db_, "INSERT OR REPLACE INTO quotas (tenant, gpus) VALUES (?, ?)");
    if (put_quota.get() == nullptr) return fail("prepare");
    for (const auto& [tenant, gpus] : changes.quotas) {
      sqlite3_reset(put_quota.get());
      sqlite3_bind_text(put_quota.get(), 1, tenant.data(), static_cast<int>(tenant.size()),
                        SQLITE_TRANSIENT);
      sqlite3_bind_int64(put_quota.get(), 2, gpus);
      if (sqlite3_step(put_quota.get()) != SQLITE_DONE) return fail("write quota " + tenant);
    }
    Statement put_price(db_, "INSERT OR REPLACE INTO prices (model, effective, record) VALUES (?, ?, ?)");
    Statement put_plan(db_, "INSERT OR REPLACE INTO plans (tenant, record) VALUES (?, ?)");
    Statement put_entry(db_, "INSERT INTO ledger (id, record) VALUES (?, ?)");
    if (put_price.get() == nullptr || put_plan.get() == nullptr || put_entry.get() == nullptr) {
      return fail("prepare");
    }
    for (const billing::Price& price : changes.prices) {
      if (!PutRow(put_price.get(), price.gpu_model(), price.effective_unix_ms(), price)) {
        return fail("write price of " + price.gpu_model());
      }
    }
    for (const billing::Plan& plan : changes.plans) {
      if (!PutRow(put_plan.get(), plan.tenant(), std::nullopt, plan)) {
        return fail("write plan of " + plan.tenant());
      }
    }
    for (const billing::LedgerEntry& entry : changes.ledger) {
      if (!PutRow(put_entry.get(), std::nullopt, entry.id(), entry)) {
        return fail(absl::StrCat("write ledger entry ", entry.id()));
      }
    }
    if (absl::Status s = PutImages(changes.images); !s.ok()) return fail(std::string(s.message()));
    if (absl::Status s = PutVolumes(changes.volumes); !s.ok()) return fail(std::string(s.message()));
    if (absl::Status s = PutSnapshots(changes.snapshots); !s.ok()) return fail(std::string(s.message()));
  }
  if (absl::Status s = Exec("COMMIT"); !s.ok()) {
    Exec("ROLLBACK").IgnoreError();  // as above: the COMMIT error is the one to report
    return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<SqliteStore::Contents> SqliteStore::LoadAll() {
  Contents out;
  Statement jobs(db_, "SELECT record, seq FROM jobs ORDER BY seq");
  if (jobs.get() == nullptr) return SqliteError(db_, "read jobs");
  int rc;
  while ((rc = sqlite3_step(jobs.get())) == SQLITE_ROW) {
    std::string text(reinterpret_cast<const char*>(sqlite3_column_text(jobs.get(), 0)),
                     sqlite3_column_bytes(jobs.get(), 0));
    absl::StatusOr<JobRecord> job = DecodeJob(text);
    if (!job.ok()) {
      return absl::DataLossError(absl::StrCat("state database, jobs row ", sqlite3_column_int64(jobs.get(), 1), ": ",
                                              job.status().message()));
    }
    out.jobs.push_back(*std::move(job));
  }
  if (rc != SQLITE_DONE) return SqliteError(db_, "read jobs");
  Statement nodes(db_, "SELECT record, name FROM nodes ORDER BY name");
  if (nodes.get() == nullptr) return SqliteError(db_, "read nodes");
  while ((rc = sqlite3_step(nodes.get())) == SQLITE_ROW) {
    std::string text(reinterpret_cast<const char*>(sqlite3_column_text(nodes.get(), 0)),
                     sqlite3_column_bytes(nodes.get(), 0));
    absl::StatusOr<NodeRecord> node = DecodeNode(text);
    if (!node.ok()) {
      return absl::DataLossError(absl::StrCat("state database, nodes row ",
                                              reinterpret_cast<const char*>(sqlite3_column_text(nodes.get(), 1)), ": ",
                                              node.status().message()));
    }
    out.nodes.push_back(*std::move(node));
  }
  if (rc != SQLITE_DONE) return SqliteError(db_, "read nodes");
  Statement quotas(db_, "SELECT tenant, gpus FROM quotas ORDER BY tenant");
  if (quotas.get() == nullptr) return SqliteError(db_, "read quotas");
  while ((rc = sqlite3_step(quotas.get())) == SQLITE_ROW) {
    std::string tenant(reinterpret_cast<const char*>(sqlite3_column_text(quotas.get(), 0)),
                       sqlite3_column_bytes(quotas.get(), 0));
    out.quotas[tenant] = static_cast<int32_t>(sqlite3_column_int64(quotas.get(), 1));
  }
  if (rc != SQLITE_DONE) return SqliteError(db_, "read quotas");
  RETURN_IF_ERROR(ReadRows("prices", "SELECT record FROM prices ORDER BY model, effective", &out.prices));
  RETURN_IF_ERROR(ReadRows("plans", "SELECT record FROM plans ORDER BY tenant", &out.plans));
  RETURN_IF_ERROR(ReadRows("ledger", "SELECT record FROM ledger ORDER BY id", &out.ledger));
  RETURN_IF_ERROR(ReadRows("images", "SELECT record FROM images ORDER BY tenant, name", &out.images));
  RETURN_IF_ERROR(ReadRows("volumes", "SELECT record FROM volumes ORDER BY tenant, name", &out.volumes));
  RETURN_IF_ERROR(ReadRows("snapshots", "SELECT record FROM snapshots ORDER BY id", &out.snapshots));
  return out;
}

bool SqliteStore::PutRow(sqlite3_stmt* stmt, std::optional<std::string> text_key,
                         std::optional<int64_t> int_key, const google::protobuf::Message& row) {
  const std::string text = EncodeBillingRow(row);
  sqlite3_reset(stmt);
  int i = 1;
  if (text_key) {
    sqlite3_bind_text(stmt, i++, text_key->data(), static_cast<int>(text_key->size()), SQLITE_TRANSIENT);
  }
  if (int_key) sqlite3_bind_int64(stmt, i++, *int_key);
  sqlite3_bind_text(stmt, i, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  return sqlite3_step(stmt) == SQLITE_DONE;
}

template <typename Row>
absl::Status SqliteStore::ReadRows(const char* table, const char* sql, std::vector<Row>* out) {
  Statement select(db_, sql);
  if (select.get() == nullptr) return SqliteError(db_, absl::StrCat("read ", table));
  int rc;
  while ((rc = sqlite3_step(select.get())) == SQLITE_ROW) {
    std::string_view text(reinterpret_cast<const char*>(sqlite3_column_text(select.get(), 0)),
                          sqlite3_column_bytes(select.get(), 0));
    Row row;
    if (absl::Status s = DecodeBillingRow(table, text, &row); !s.ok()) {
      return absl::DataLossError(absl::StrCat("state database, ", table, " row ", out->size() + 1, ": ",
                                              s.message()));
    }
    out->push_back(std::move(row));
  }
  if (rc != SQLITE_DONE) return SqliteError(db_, absl::StrCat("read ", table));
  return absl::OkStatus();
}

}  // namespace athanor::coord
