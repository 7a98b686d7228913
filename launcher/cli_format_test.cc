#include "launcher/cli_format.h"

#include <gtest/gtest.h>

namespace athanor::cli {
namespace {

TEST(CliFormatTest, TableAlignsColumns) {
  EXPECT_EQ(FormatTable({{"ID", "STATE"}, {"12", "RUNNING"}, {"3", "X"}}),
            "ID  STATE\n12  RUNNING\n3   X\n");
}

TEST(CliFormatTest, PrefixesEveryLine) {
  EXPECT_EQ(PrefixLines(2, "a\nb\n"), "[rank 2] a\n[rank 2] b\n");
  EXPECT_EQ(PrefixLines(0, "no newline"), "[rank 0] no newline\n");
  EXPECT_EQ(PrefixLines(0, ""), "");
}

TEST(CliFormatTest, JobShowsRanksAndExits) {
  rpc::Job job;
  job.set_id("4");
  job.set_state(rpc::JOB_FAILED);
  job.set_reason("rank 1 on node n1 exited with code 3");
  job.mutable_spec()->set_nodes(1);
  job.mutable_spec()->set_gpus_per_node(2);
  for (int r = 0; r < 2; ++r) {
    rpc::RankPlacement* p = job.add_allocation();
    p->set_rank(r);
    p->set_node("n1");
    p->set_local_rank(r);
    p->add_gpu_ids(r);
    rpc::RankExit* e = job.add_ranks();
    e->set_rank(r);
    e->set_started(true);
    e->set_exited(true);
    e->set_exit_code(r == 1 ? 3 : 143);
    e->set_signal(r == 1 ? 0 : 15);
  }
  std::string out = FormatJob(job);
  EXPECT_NE(out.find("state:    FAILED\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("attempts:"), std::string::npos) << out;  // one attempt: nothing to add
  for (int a = 1; a <= 2; ++a) {
    rpc::AttemptNodes* attempt = job.add_attempts();
    attempt->set_attempt(a);
    attempt->add_nodes(a == 1 ? "n2" : "n1");
  }
  out = FormatJob(job);
  EXPECT_NE(out.find("attempts:  1 on n2; 2 on n1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("0     n1    0          0           0     EXITED  143 (signal 15)\n"),
            std::string::npos) << out;
  EXPECT_NE(out.find("1     n1    0          1           1     EXITED  3\n"), std::string::npos)
      << out;
  EXPECT_EQ(StateName(rpc::NODE_UNKNOWN), "UNKNOWN");
  EXPECT_EQ(out.find("stragglers:"), std::string::npos) << out;  // not asked for
  job.mutable_spec()->set_move_off_stragglers(true);
  job.add_avoid_nodes("n2");
  out = FormatJob(job);
  EXPECT_NE(out.find("stragglers:  moves off a straggler's node; avoids n2\n"), std::string::npos) << out;
}

}  // namespace
TEST(CliFormatTest, ControlCharactersNeverReachTheTerminal) {
  EXPECT_EQ(EscapeControls("a\x1b[2Jb\rc\nd\x7f\xc3\xa9"), "a\\x1b[2Jb\\x0dc\\x0ad\\x7f\xc3\xa9");
  rpc::Job j;
  j.set_id("7");
  j.mutable_spec()->set_name("x");
  j.mutable_spec()->add_command("sh");
  j.mutable_spec()->add_command("-c");
  j.mutable_spec()->add_command("printf '\x1b]0;owned\x07'\n");
  std::string out = FormatJob(j);
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
  EXPECT_NE(out.find("command:  sh -c printf '\\x1b]0;owned\\x07'\\x0a"), std::string::npos) << out;
}

TEST(CliFormatTest, ElasticJobShowsItsSizeAndEveryResize) {
  rpc::Job j;
  j.set_id("4");
  j.set_state(rpc::JOB_RUNNING);
  j.mutable_spec()->set_nodes(3);
  j.mutable_spec()->set_min_nodes(2);
  j.mutable_spec()->set_gpus_per_node(1);
  j.mutable_spec()->set_global_batch(12);
  for (const char* node : {"n1", "n3"}) j.add_allocation()->set_node(node);
  rpc::AttemptNodes* a1 = j.add_attempts();
  a1->set_attempt(1);
  for (const char* node : {"n1", "n2", "n3"}) a1->add_nodes(node);
  a1->set_outcome("shrunk");
  a1->set_end_unix(1796292000);  // 2026-12-03T10:00:00Z
  a1->set_steps_lost(3);
  a1->set_end_reason("shrunk: node n2 is down");
  rpc::AttemptNodes* a2 = j.add_attempts();
  a2->set_attempt(2);
  for (const char* node : {"n1", "n3"}) a2->add_nodes(node);
  std::string out = FormatJob(j);
  EXPECT_NE(out.find("gang:          2 of 2..3 node(s) x 1 GPU(s), elastic\n"), std::string::npos) << out;
  EXPECT_NE(out.find("global batch:  12 samples a step at every size\n"), std::string::npos) << out;
  EXPECT_NE(out.find("resize:        2026-12-03T10:00:00Z attempt 1: shrunk 3 -> 2 node(s), 3 step(s) lost: "
                     "shrunk: node n2 is down\n"),
            std::string::npos)
      << out;
  j.set_state(rpc::JOB_PENDING);
  out = FormatJob(j);
  EXPECT_NE(out.find("gang:          2..3 node(s) x 1 GPU(s), elastic\n"), std::string::npos) << out;
}

TEST(CliFormatTest, InstanceShowsLastActivityReclaimAndAdvice) {
  rpc::Job j;
  j.set_id("9");
  j.mutable_spec()->set_interactive(true);
  j.set_reason("idle since 2026-12-03T10:00:00Z; reclaim in 60 s, at 2026-12-03T10:11:00Z");
  j.mutable_last_activity()->set_signal("network");
  j.mutable_last_activity()->set_detail("1.2 MB/s");
  j.mutable_last_activity()->set_at_unix(1796292000);  // 2026-12-03T10:00:00Z
  j.set_reclaim_at_unix(1796292660);
  j.set_advice("try --precision bf16");
  std::string out = FormatJob(j);
  EXPECT_NE(out.find("last activity:  network (1.2 MB/s) at 2026-12-03T10:00:00Z\n"), std::string::npos) << out;
  EXPECT_NE(out.find("reclaim:        2026-12-03T10:11:00Z (idle: warned; `athanor alloc --keep` extends it)\n"),
            std::string::npos) << out;
  EXPECT_NE(out.find("advice:         out of memory: try --precision bf16\n"), std::string::npos) << out;
  j.set_reason("");
  out = FormatJob(j);
  EXPECT_NE(out.find("reclaim:        2026-12-03T10:11:00Z if idle until then\n"), std::string::npos) << out;
}

}  // namespace athanor::cli
