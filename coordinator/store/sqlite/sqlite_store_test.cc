#include "coordinator/store/sqlite/sqlite_store.h"
#include "coordinator/store/sqlite/wal_checkpointer.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>

namespace athanor::coord {
namespace {

std::string TempPath(const std::string& name) {
  char dir[] = "/tmp/job_store_test.XXXXXX";
  EXPECT_NE(mkdtemp(dir), nullptr);
  return std::string(dir) + "/" + name;
}

TEST(SqliteStoreTest, UsesWal) {
  auto store = SqliteStore::Open(TempPath("state.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->JournalMode().value(), "wal");
}

TEST(SqliteStoreTest, BillingRowsSurviveAReopenAndTheLedgerIsAppendOnly) {
  std::string path = TempPath("state.db");
  Changes c;
  billing::Price price;
  price.set_gpu_model("H200");
  price.set_effective_unix_ms(1000);
  price.set_gpu_hour_micros(3500000);
  c.prices.push_back(price);
  price.set_gpu_hour_micros(3600000);  // the same key again: replaces
  c.prices.push_back(price);
  billing::Plan plan;
  plan.set_tenant("acme");
  plan.set_credit_limit_micros(5);
  c.plans.push_back(plan);
  for (int64_t id : {1, 2}) {
    billing::LedgerEntry e;
    e.set_id(id);
    e.set_tenant("acme");
    e.set_kind(id == 1 ? billing::CREDIT : billing::ACCRUAL);
    e.set_amount_micros(id == 1 ? 100 : -40);
    c.ledger.push_back(e);
  }
  {
    auto store = SqliteStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->Commit(c).ok());
    // An entry id written again fails the whole batch: nothing of it lands.
    Changes again;
    again.ledger.push_back(c.ledger[1]);
    plan.set_credit_limit_micros(9);
    again.plans.push_back(plan);
    absl::Status s = (*store)->Commit(again);
    EXPECT_EQ(s.ToString(), "INTERNAL: sqlite write ledger entry 2: UNIQUE constraint failed: ledger.id");
  }
  auto store = SqliteStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  absl::StatusOr<Store::Contents> got = (*store)->LoadAll();
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->prices.size(), 1u);
  EXPECT_EQ(got->prices[0].gpu_hour_micros(), 3600000);
  ASSERT_EQ(got->plans.size(), 1u);
  EXPECT_EQ(got->plans[0].credit_limit_micros(), 5);
  ASSERT_EQ(got->ledger.size(), 2u);
  EXPECT_EQ(got->ledger[0].kind(), billing::CREDIT);
  EXPECT_EQ(got->ledger[1].amount_micros(), -40);
}

TEST(SqliteStoreTest, ReopenKeepsJobsAndNodes) {
  std::string path = TempPath("state.db");
  JobRecord job;
  job.id = "7";
  job.seq = 7;
  job.spec.name = "train";
  job.spec.command = {"sh", "-c", "echo hi"};
  job.spec.env = {{"A", "1"}};
  job.spec.nodes = 2;
  job.spec.gpus_per_node = 2;
  job.state = JobState::kRunning;
  job.attempt = 3;
  job.allocated = true;
  job.allocation = {{0, "n1", 0, 0, {1}}};
  job.ranks = {{0, true, true, 3, 0}};
  job.master_addr = "10.0.0.1";
  job.master_port = 29501;
  job.attempt_nodes = {{"n2", "n3"}, {}, {"n1", "n2"}};
  job.attempt_spans = {{100.5, 200.25, "preempted", "preempted by job 4"}, {300, 0, "", ""}};
  NodeRecord node;
  node.name = "n1";
  node.host = "10.0.0.1";
  node.agent_address = "10.0.0.1:7800";
  node.inventory.gpus = 8;
  node.inventory.labels = {{"rack", "r1"}};
  node.state = NodeState::kDown;
  {
    auto store = SqliteStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->Commit({{job}, {node}}).ok());
    job.state = JobState::kSucceeded;  // a later transition overwrites
    ASSERT_TRUE((*store)->Commit({{job}, {}}).ok());
  }
  auto store = SqliteStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  auto contents = (*store)->LoadAll();
  ASSERT_TRUE(contents.ok()) << contents.status();
  ASSERT_EQ(contents->jobs.size(), 1u);
  const JobRecord& j = contents->jobs[0];
  EXPECT_EQ(j.id, "7");
  EXPECT_EQ(j.seq, 7);
  EXPECT_EQ(j.spec.name, "train");
  EXPECT_EQ(j.spec.command, (std::vector<std::string>{"sh", "-c", "echo hi"}));
  EXPECT_EQ(j.spec.env.at("A"), "1");
  EXPECT_EQ(j.state, JobState::kSucceeded);
  EXPECT_EQ(j.attempt, 3);
  EXPECT_TRUE(j.allocated);
  ASSERT_EQ(j.allocation.size(), 1u);
  EXPECT_EQ(j.allocation[0].node, "n1");
  EXPECT_EQ(j.allocation[0].gpu_ids, (std::vector<int32_t>{1}));
  ASSERT_EQ(j.ranks.size(), 1u);
  EXPECT_EQ(j.ranks[0].exit_code, 3);
  EXPECT_EQ(j.master_port, 29501);
  EXPECT_EQ(j.attempt_nodes,
            (std::vector<std::vector<std::string>>{{"n2", "n3"}, {}, {"n1", "n2"}}));
  ASSERT_EQ(j.attempt_spans.size(), 2u);
  EXPECT_EQ(j.attempt_spans[0].start, 100.5);
  EXPECT_EQ(j.attempt_spans[0].end, 200.25);
  EXPECT_EQ(j.attempt_spans[0].outcome, "preempted");
  EXPECT_EQ(j.attempt_spans[0].reason, "preempted by job 4");
  EXPECT_EQ(j.attempt_spans[1].start, 300);
  EXPECT_EQ(j.attempt_spans[1].outcome, "");
  ASSERT_EQ(contents->nodes.size(), 1u);
  EXPECT_EQ(contents->nodes[0].name, "n1");
  EXPECT_EQ(contents->nodes[0].inventory.gpus, 8);
  EXPECT_EQ(contents->nodes[0].inventory.labels.at("rack"), "r1");
  EXPECT_EQ(contents->nodes[0].state, NodeState::kDown);
}

// A job whose record fills most of a page, so every commit adds frames.
JobRecord BulkyJob(int64_t seq) {
  JobRecord job;
  job.id = std::to_string(seq);
  job.seq = seq;
  job.spec.command = {"sh", "-c", std::string(3000, 'x')};
  return job;
}

// Commits never copy the log back themselves: SQLite's automatic checkpoint
// (at 1,000 frames) is off, so with nobody asked the log only grows.
TEST(SqliteStoreTest, CommitsDoNotCheckpoint) {
  auto store = SqliteStore::Open(TempPath("state.db"), {.checkpoint_frames = 1 << 20, .inline_frames = 1 << 20});
  ASSERT_TRUE(store.ok()) << store.status();
  int previous = 0;
  for (int64_t seq = 1; seq <= 500; ++seq) {
    ASSERT_TRUE((*store)->Commit({{BulkyJob(seq)}, {}}).ok());
    const int frames = (*store)->wal_stats().log_frames;
    ASSERT_GT(frames, previous) << "after commit " << seq;
    previous = frames;
  }
  EXPECT_GT(previous, 1000);
  EXPECT_EQ((*store)->wal_stats().requests, 0u);
  EXPECT_EQ((*store)->wal_stats().inline_checkpoints, 0u);
  EXPECT_EQ((*store)->checkpointer()->stats().checkpoints, 0u);
}

// Past the threshold each commit asks the checkpointer; a pass made with no
// commit beside it copies the whole log, and everything reads back.
TEST(SqliteStoreTest, TheCheckpointerCopiesTheLogBack) {
  const std::string path = TempPath("state.db");
  {
    auto store = SqliteStore::Open(path, {.checkpoint_frames = 8, .inline_frames = 1 << 20, .finish_frames = 0});
    ASSERT_TRUE(store.ok()) << store.status();
    for (int64_t seq = 1; seq <= 200; ++seq) ASSERT_TRUE((*store)->Commit({{BulkyJob(seq)}, {}}).ok());
    EXPECT_GT((*store)->wal_stats().requests, 0u);
    EXPECT_EQ((*store)->wal_stats().inline_checkpoints, 0u);
    WalCheckpointer& checkpointer = *(*store)->checkpointer();
    checkpointer.Request();
    checkpointer.WaitIdle();
    const WalCheckpointer::Stats stats = checkpointer.stats();
    EXPECT_GE(stats.checkpoints, 1u);
    EXPECT_EQ(stats.failures, 0u);
    EXPECT_EQ(stats.last_log_frames, (*store)->wal_stats().log_frames);
    EXPECT_EQ(stats.last_checkpointed_frames, stats.last_log_frames);
  }
  auto store = SqliteStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  auto contents = (*store)->LoadAll();
  ASSERT_TRUE(contents.ok()) << contents.status();
  ASSERT_EQ(contents->jobs.size(), 200u);
  EXPECT_EQ(contents->jobs.front().id, "1");
  EXPECT_EQ(contents->jobs.back().id, "200");
  EXPECT_EQ(contents->jobs.back().spec.command[2], std::string(3000, 'x'));
}

// A pass that copied the whole log: the next commit starts it over.
TEST(SqliteStoreTest, AfterAWholePassTheNextCommitStartsTheLogOver) {
  auto store = SqliteStore::Open(TempPath("state.db"),
                              {.checkpoint_frames = 16, .inline_frames = 1 << 20, .finish_frames = 16});
  ASSERT_TRUE(store.ok()) << store.status();
  int64_t seq = 1;
  while ((*store)->wal_stats().requests == 0) {
    ASSERT_LT(seq, 100) << "the log never reached 16 frames";
    ASSERT_TRUE((*store)->Commit({{BulkyJob(seq++)}, {}}).ok());
  }
  (*store)->checkpointer()->WaitIdle();
  const int frames = (*store)->wal_stats().log_frames;
  EXPECT_EQ((*store)->checkpointer()->stats().last_checkpointed_frames, frames);
  ASSERT_TRUE((*store)->Commit({{BulkyJob(seq++)}, {}}).ok());
  const SqliteStore::WalStats wal = (*store)->wal_stats();
  EXPECT_EQ(wal.restarts, 1u);
  EXPECT_EQ(wal.finishes, 0u);
  EXPECT_LT(wal.log_frames, frames);
}

// A pass that could not copy the whole log (here a reader holds an older
// snapshot; in the coordinator, commits written while it ran): once it is
// over, the next commit copies the rest itself and the one after starts the
// log over, where without that the log would keep growing.
TEST(SqliteStoreTest, ACommitCopiesWhatAPassLeftAndTheLogStartsOver) {
  const std::string path = TempPath("state.db");
  auto store = SqliteStore::Open(path, {.checkpoint_frames = 16, .inline_frames = 1 << 20, .finish_frames = 16});
  ASSERT_TRUE(store.ok()) << store.status();
  int64_t seq = 1;
  while ((*store)->wal_stats().log_frames < 10) ASSERT_TRUE((*store)->Commit({{BulkyJob(seq++)}, {}}).ok());
  const int snapshot = (*store)->wal_stats().log_frames;
  sqlite3* reader = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &reader), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(reader, "BEGIN; SELECT count(*) FROM jobs;", nullptr, nullptr, nullptr), SQLITE_OK);
  while ((*store)->wal_stats().requests == 0) {
    ASSERT_LT(seq, 100) << "the log never reached 16 frames";
    ASSERT_TRUE((*store)->Commit({{BulkyJob(seq++)}, {}}).ok());
  }
  (*store)->checkpointer()->WaitIdle();
  const WalCheckpointer::Stats pass = (*store)->checkpointer()->stats();
  EXPECT_EQ(pass.checkpoints, 1u);
  EXPECT_EQ(pass.last_log_frames, (*store)->wal_stats().log_frames);
  EXPECT_EQ(pass.last_checkpointed_frames, snapshot);  // no further than the reader's snapshot
  ASSERT_EQ(sqlite3_exec(reader, "COMMIT", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(reader);

  ASSERT_TRUE((*store)->Commit({{BulkyJob(seq++)}, {}}).ok());
  SqliteStore::WalStats wal = (*store)->wal_stats();
  EXPECT_EQ(wal.finishes, 1u);
  EXPECT_EQ(wal.requests, 1u);
  EXPECT_EQ(wal.restarts, 0u);
  const int frames = wal.log_frames;
  ASSERT_TRUE((*store)->Commit({{BulkyJob(seq++)}, {}}).ok());
  wal = (*store)->wal_stats();
  EXPECT_EQ(wal.restarts, 1u);
  EXPECT_EQ(wal.finishes, 1u);
  EXPECT_EQ(wal.inline_checkpoints, 0u);
  EXPECT_LT(wal.log_frames, frames);
}

// A log that reaches the hard cap is copied inside the commit, and the next
// commit starts it over: it never holds much more than the cap.
TEST(SqliteStoreTest, ALogPastTheCapIsCheckpointedInline) {
  auto store = SqliteStore::Open(TempPath("state.db"), {.checkpoint_frames = 64, .inline_frames = 64, .finish_frames = 16});
  ASSERT_TRUE(store.ok()) << store.status();
  for (int64_t seq = 1; seq <= 300; ++seq) ASSERT_TRUE((*store)->Commit({{BulkyJob(seq)}, {}}).ok());
  const SqliteStore::WalStats stats = (*store)->wal_stats();
  EXPECT_GE(stats.inline_checkpoints, 2u);
  EXPECT_EQ(stats.requests, 0u);
  EXPECT_GE(stats.max_log_frames, 64);
  EXPECT_LT(stats.max_log_frames, 64 + 16);
}

// The baseline mode: SQLite's own checkpoint inside the commit that reaches
// the threshold, so the log file never holds much more than it.
TEST(SqliteStoreTest, WithoutACheckpointerCommitsCheckpoint) {
  const std::string path = TempPath("state.db");
  auto store = SqliteStore::Open(path, {.checkpoint_frames = 64, .inline_frames = 64, .finish_frames = 16, .background = false});
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->checkpointer(), nullptr);
  for (int64_t seq = 1; seq <= 300; ++seq) ASSERT_TRUE((*store)->Commit({{BulkyJob(seq)}, {}}).ok());
  struct stat wal;
  ASSERT_EQ(stat((path + "-wal").c_str(), &wal), 0);
  const off_t frame = 24 + 4096;  // frame header and page
  EXPECT_GE(wal.st_size, 32 + 64 * frame);
  EXPECT_LT(wal.st_size, 32 + (64 + 16) * frame);
}

// kill -9 while the checkpointer and commits copy the log back (tiny
// thresholds: a pass every few commits): every commit that returned OK is
// there after the restart, and nothing else but possibly the one in flight.
TEST(SqliteStoreTest, AcknowledgedCommitsSurviveAKillDuringCheckpoints) {
  const std::string path = TempPath("state.db");
  int acks[2];
  ASSERT_EQ(pipe(acks), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(acks[0]);
    auto store = SqliteStore::Open(path, {.checkpoint_frames = 8, .inline_frames = 64, .finish_frames = 4});
    if (!store.ok()) _exit(2);
    for (int64_t seq = 1;; ++seq) {
      if (!(*store)->Commit({{BulkyJob(seq)}, {}}).ok()) _exit(3);
      if (write(acks[1], &seq, sizeof(seq)) != sizeof(seq)) _exit(4);
    }
  }
  close(acks[1]);
  // Watchdog: a child that stops acknowledging fails the test in 30 s.
  int64_t acked = 0;
  while (acked < 400) {
    pollfd p{acks[0], POLLIN, 0};
    ASSERT_EQ(poll(&p, 1, 30000), 1) << "no commit acknowledged for 30 s (last " << acked << ")";
    ASSERT_EQ(read(acks[0], &acked, sizeof(acked)), static_cast<ssize_t>(sizeof(acked)));
  }
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  int64_t later = 0;
  while (read(acks[0], &later, sizeof(later)) == static_cast<ssize_t>(sizeof(later))) acked = later;
  close(acks[0]);

  auto store = SqliteStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  auto contents = (*store)->LoadAll();
  ASSERT_TRUE(contents.ok()) << contents.status();
  ASSERT_GE(static_cast<int64_t>(contents->jobs.size()), acked);
  ASSERT_LE(static_cast<int64_t>(contents->jobs.size()), acked + 1);
  for (size_t i = 0; i < contents->jobs.size(); ++i) {
    ASSERT_EQ(contents->jobs[i].seq, static_cast<int64_t>(i + 1));
    ASSERT_EQ(contents->jobs[i].spec.command[2], std::string(3000, 'x'));
  }
}

TEST(SqliteStoreTest, LogThresholdsAreChecked) {
  EXPECT_EQ(SqliteStore::Open(TempPath("state.db"), {.checkpoint_frames = 0, .inline_frames = 100})
                .status()
                .message(),
            "state database log thresholds: checkpoint_frames 0, inline_frames 100, finish_frames 250 "
            "(want 1 <= checkpoint_frames <= inline_frames and 0 <= finish_frames <= checkpoint_frames)");
  EXPECT_EQ(SqliteStore::Open(TempPath("state.db"), {.checkpoint_frames = 100, .inline_frames = 99})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SqliteStore::Open(TempPath("state.db"), {.checkpoint_frames = 100, .inline_frames = 200, .finish_frames = 101})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

// A database of the release before the row format (hand-written JSON rows,
// user_version 0) has its rows rewritten once, at open; a row that does not
// read is DataLoss naming it, and the database is left as it was.
TEST(SqliteStoreTest, OldRowsAreRewrittenAtOpenAndBadOnesNamed) {
  const std::string path = TempPath("state.db");
  auto write_old = [&](const char* job_row) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    const std::string sql = std::string(
        "DROP TABLE IF EXISTS jobs; DROP TABLE IF EXISTS nodes;"
        "CREATE TABLE jobs (seq INTEGER PRIMARY KEY, record TEXT NOT NULL);"
        "CREATE TABLE nodes (name TEXT PRIMARY KEY, record TEXT NOT NULL);"
        "PRAGMA user_version = 0;"
        "INSERT INTO nodes VALUES ('n1', '{\"name\":\"n1\",\"gpus\":8,\"labels\":{\"rack\":\"a\"},\"state\":3,\"drain\":true}');"
        "INSERT INTO jobs VALUES (3, '") + job_row + "');";
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
  };
  write_old(R"({"id":"3","seq":3,"state":2,"usage":[[1.5,0,4]],"attempt_nodes":[["n1"]]})");
  {
    auto store = SqliteStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    auto contents = (*store)->LoadAll();
    ASSERT_TRUE(contents.ok()) << contents.status();
    ASSERT_EQ(contents->jobs.size(), 1u);
    EXPECT_EQ(contents->jobs[0].state, JobState::kRunning);
    EXPECT_EQ(contents->jobs[0].usage[0].start, 1.5);
    EXPECT_EQ(contents->jobs[0].attempt_nodes, (std::vector<std::vector<std::string>>{{"n1"}}));
    ASSERT_EQ(contents->nodes.size(), 1u);
    EXPECT_EQ(contents->nodes[0].state, NodeState::kDown);
    EXPECT_EQ(contents->nodes[0].inventory.gpus, 8);
    EXPECT_TRUE(contents->nodes[0].drain);
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT record FROM nodes", -1, &st, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(sqlite3_column_text(st, 0))),
            R"({"node":{"name":"n1","inventory":{"gpus":8,"labels":{"rack":"a"}},"state":"NODE_DOWN"},"drain":true})");
  sqlite3_finalize(st);
  sqlite3_close(db);

  write_old(R"({"id":"3","seq":3,"state":0,"usage":[[1.5,0]]})");
  EXPECT_EQ(SqliteStore::Open(path).status().message(), "state database, jobs row 3: job record: bad usage entry");
  write_old(R"({"id":"3","seq":3,"state":0,"attempt":1.5})");
  EXPECT_EQ(SqliteStore::Open(path).status().message(),
            "state database, jobs row 3: job record: (job.attempt): invalid value 1.5 for type TYPE_INT32");
}

TEST(SqliteStoreTest, UnwritablePathIsAnError) {
  auto store = SqliteStore::Open("/nonexistent-dir/state.db");
  EXPECT_EQ(store.status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace athanor::coord
