// Ranks as forked processes over file://: the parent plays the collective
// (it ANDs the ranks' votes, like the trainer's all-reduce), so a rank that
// dies mid-checkpoint is seen as "not durable" and the step never commits.
// A watchdog (alarm) bounds every test; children die with the parent.
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "checkpoint/catalog.h"
#include "checkpoint/checkpoint_test_util.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/file/file_object_store.h"
#include "checkpoint/restore.h"

namespace athanor {
namespace {

using testing_util::FillRankState;
using testing_util::RankState;

struct Vote {
  int64_t step;
  int32_t mine;
};

// The child's side: sends its vote, reads the AND. EOF means no agreement.
class PipeBarrier final : public CommitBarrier {
 public:
  PipeBarrier(int to_parent, int from_parent) : to_(to_parent), from_(from_parent) {}
  absl::StatusOr<bool> AllDurable(int64_t step, bool mine) override {
    Vote v{step, mine ? 1 : 0};
    if (write(to_, &v, sizeof(v)) != sizeof(v)) return absl::UnavailableError("parent gone");
    int32_t all = 0;
    if (read(from_, &all, sizeof(all)) != sizeof(all)) return absl::UnavailableError("parent gone");
    return all != 0;
  }

 private:
  int to_, from_;
};

struct Child {
  pid_t pid;
  int votes;    // parent reads votes here
  int answers;  // parent writes the AND here
};

// Forks a rank that saves `steps`; with die_before_step >= 0 it SIGKILLs
// itself just before saving that step.
Child ForkRank(const std::string& dir, int rank, int world, std::vector<int64_t> steps, int64_t die_before_step) {
  int up[2], down[2];
  EXPECT_EQ(pipe(up), 0);
  EXPECT_EQ(pipe(down), 0);
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    alarm(30);
    close(up[0]);
    close(down[1]);
    auto store = FileObjectStore::Open(dir);
    if (!store.ok()) _exit(10);
    PipeBarrier barrier(up[1], down[0]);
    CheckpointerOptions o;
    o.job = "job";
    o.rank = rank;
    o.world_size = world;
    int code = 0;
    {
      Checkpointer ckpt(store->get(), &barrier, o);
      RankState s;
      for (int64_t step : steps) {
        if (step == die_before_step) raise(SIGKILL);
        FillRankState(&s, step, rank, world);
        if (!ckpt.Save(step, s.state).ok() || !ckpt.Wait().ok()) code = 20;
      }
    }
    _exit(code);
  }
  close(up[1]);
  close(down[0]);
  return Child{pid, up[0], down[1]};
}

// Plays the all-reduce for `rounds` rounds: a dead rank votes "no".
std::vector<bool> Coordinate(std::vector<Child>& children, int rounds) {
  std::vector<bool> results;
  for (int round = 0; round < rounds; ++round) {
    bool all = true;
    for (Child& c : children) {
      Vote v{};
      if (c.votes < 0 || read(c.votes, &v, sizeof(v)) != sizeof(v)) {
        all = false;
        if (c.votes >= 0) close(c.votes);
        c.votes = -1;
      } else {
        all = all && v.mine != 0;
      }
    }
    int32_t answer = all ? 1 : 0;
    for (Child& c : children) {
      if (c.answers >= 0 && write(c.answers, &answer, sizeof(answer)) != sizeof(answer)) {
        close(c.answers);
        c.answers = -1;
      }
    }
    results.push_back(all);
  }
  return results;
}

int Reap(const Child& c) {
  int status = 0;
  waitpid(c.pid, &status, 0);
  if (c.votes >= 0) close(c.votes);
  if (c.answers >= 0) close(c.answers);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string TempDir() {
  std::string tmpl = ::testing::TempDir() + "/ckpt-fork-XXXXXX";
  return mkdtemp(tmpl.data());
}

TEST(CheckpointerProcesses, ThreeProcessesCommitTwoSteps) {
  alarm(60);
  signal(SIGPIPE, SIG_IGN);
  std::string dir = TempDir();
  std::vector<Child> children;
  for (int r = 0; r < 3; ++r) children.push_back(ForkRank(dir, r, 3, {1, 2}, -1));
  EXPECT_EQ(Coordinate(children, 2), (std::vector<bool>{true, true}));
  for (const Child& c : children) EXPECT_EQ(Reap(c), 0);
  auto store = FileObjectStore::Open(dir);
  auto committed = ListCommitted(store->get(), "job");
  ASSERT_TRUE(committed.ok());
  ASSERT_EQ(committed->size(), 2u);
  EXPECT_EQ((*committed)[1].step, 2);
  EXPECT_EQ((*committed)[1].world_size, 3);
  alarm(0);
}

TEST(CheckpointerProcesses, ARankKilledMidCheckpointLeavesThePreviousCommit) {
  alarm(60);
  signal(SIGPIPE, SIG_IGN);
  std::string dir = TempDir();
  std::vector<Child> children = {ForkRank(dir, 0, 2, {1, 2}, -1), ForkRank(dir, 1, 2, {1, 2}, 2)};
  EXPECT_EQ(Coordinate(children, 2), (std::vector<bool>{true, false}));
  EXPECT_EQ(Reap(children[0]), 20);  // rank 0's step 2 did not commit
  EXPECT_EQ(Reap(children[1]), 128 + SIGKILL);
  auto store = FileObjectStore::Open(dir);
  auto committed = ListCommitted(store->get(), "job");
  ASSERT_EQ(committed->size(), 1u);
  EXPECT_EQ((*committed)[0].step, 1);
  std::vector<float> w(20), opt(12);
  std::vector<TensorRef> targets = {{"w", TensorDType::kF32, {5, 4}, w.data(), 80, {}},
                                    {"opt", TensorDType::kF32, {3, 4}, opt.data(), 48, ShardSpec{3, 6}}};
  auto restored = Restore(store->get(), RestoreOptions{"job", 1, 2, nullptr, false}, targets);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->step, 1);
  EXPECT_EQ(opt[0], testing_util::Value(1, 2, 3, 0));
  alarm(0);
}

}  // namespace
}  // namespace athanor
