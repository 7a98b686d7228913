// The rows of record_codec.h and the reader of the old rows (legacy_rows.h).
// Stored records are trusted no further than their bytes: a number that does
// not fit its field, or a state past the enum, is DataLoss, not a conversion
// with undefined behaviour (found by fuzz_record_codec).
#include "coordinator/store/record_codec.h"

#include <gtest/gtest.h>

#include "coordinator/store/legacy_rows.h"

namespace athanor::coord {
namespace {

JobRecord FullJob() {
  JobRecord job;
  job.id = "42";
  job.seq = 42;
  job.spec.name = "quote\" back\\slash\nnew line";
  job.spec.tenant = "t\xC3\xA9";
  job.spec.priority = -3;
  job.spec.preemptible = true;
  job.spec.nodes = 2;
  job.spec.gpus_per_node = 4;
  job.spec.command = {"python3", "train.py", "--lr=0.1", std::string("\x01\x1f", 2)};
  job.spec.env = {{"Z", "1"}, {"A", "2"}, {"EMPTY", ""}};
  job.spec.checkpoint_uri = "s3://bucket/ckpt";
  job.spec.max_restarts = 5;
  job.spec.time_limit_s = 86400;
  job.spec.grace_period_s = 30;
  job.spec.gpu_model = "H200";
  job.spec.min_gpu_memory_mb = 141000;
  job.spec.cpus_per_node = 16;
  job.spec.memory_mb_per_node = 1 << 20;
  job.spec.interactive = true;
  job.spec.idle_timeout_s = 600;
  job.spec.hang_timeout_s = 45;
  job.spec.move_off_stragglers = true;
  job.idempotency_key = "key-1";
  job.state = JobState::kPreempting;
  job.attempt = 3;
  job.allocation = {{0, "n1", 0, 0, {0, 1, 2, 3}}, {1, "n2", 0, 1, {4, 5, 6, 7}}};
  job.allocated = true;
  job.ranks = {{0, true, false, 0, 0, ""}, {1, true, true, 137, 9, "out of memory"}};
  job.reason = "preempted by job 7";
  job.submit_time_unix = 1764600000;
  job.start_time_unix = 1764600010;
  job.restarts = 1;
  job.committed_step = 1200;
  job.master_addr = "10.0.0.1";
  job.master_port = 29500;
  job.network_subnet = "10.64.3.0";
  job.stopping = true;
  job.stop_outcome = JobState::kPending;
  job.stop_reason = "preempted";
  job.preempted = true;
  job.stop_kill_after_ms = 30000;
  job.preempt_deadline_unix = 1764600040.125;
  job.last_checkpoint_unix = 1764600030.5;
  job.usage = {{1764600010.25, 1764600020.75, 8}, {1764600021, 0, 8}};
  job.attempt_nodes = {{"n1", "n2"}, {"n3"}, {"n1", "n2"}};
  job.attempt_spans = {{100.5, 200.25, "preempted", "by job 4"}, {300, 0, "", ""}};
  job.last_active_unix = 1764600035.0625;
  job.idle_warned = true;
  job.hang = {3, 1, "n2", "no progress", 1764600033, 31.5};
  job.avoid_nodes = {"n9"};
  job.last_telemetry = {1200, 2.25, 15000.5, 210.75, 0.125, 65536, 2, 1.5, 1764600036000, 3, 5000};
  job.queued_at_unix = 1764600005.5;
  job.order_preemptions = 1;
  job.las_behind_seq = 40;
  job.las_recalls = true;
  return job;
}

// Every field is written and read back; the text is protobuf's JSON with
// the map sorted, so a record read back writes the same text.
TEST(RecordCodecTest, EveryFieldSurvivesARoundTrip) {
  const JobRecord job = FullJob();
  const std::string text = EncodeJob(job);
  const std::string head =
      R"({"job":{"id":"42","spec":{"name":"quote\" back\\slash\nnew line","tenant":"té","priority":-3,"preemptible":true,"nodes":2,)";
  EXPECT_EQ(text.substr(0, head.size()), head);
  EXPECT_NE(text.find(R"("env":{"A":"2","EMPTY":"","Z":"1"})"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("usage":[{"start":1764600010.25,"end":1764600020.75,"gpus":8},{"start":1764600021,"gpus":8}])"),
            std::string::npos) << text;
  absl::StatusOr<JobRecord> back = DecodeJob(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->spec.name, job.spec.name);
  EXPECT_EQ(back->spec.tenant, job.spec.tenant);
  EXPECT_EQ(back->spec.command[3], job.spec.command[3]);
  EXPECT_EQ(back->spec.env, job.spec.env);
  EXPECT_EQ(back->ranks[1].message, "out of memory");
  EXPECT_EQ(back->ranks[1].exit_code, 137);
  EXPECT_EQ(back->allocation[1].gpu_ids, (std::vector<int32_t>{4, 5, 6, 7}));
  EXPECT_EQ(back->usage[0].start, 1764600010.25);
  EXPECT_EQ(back->usage[1].gpus, 8);
  EXPECT_EQ(back->attempt_nodes, job.attempt_nodes);
  EXPECT_EQ(back->attempt_spans[0].reason, "by job 4");
  EXPECT_EQ(back->preempt_deadline_unix, 1764600040.125);
  EXPECT_EQ(back->last_telemetry.comm_wait_share, 0.125);
  EXPECT_EQ(back->last_telemetry.unix_ms, 1764600036000);
  EXPECT_EQ(back->hang.stalled_s, 31.5);
  EXPECT_EQ(back->avoid_nodes, job.avoid_nodes);
  EXPECT_EQ(back->network_subnet, "10.64.3.0");
  EXPECT_EQ(back->state, JobState::kPreempting);
  EXPECT_EQ(back->stop_outcome, JobState::kPending);
  EXPECT_EQ(back->idempotency_key, "key-1");
  EXPECT_EQ(back->queued_at_unix, 1764600005.5);
  EXPECT_EQ(back->order_preemptions, 1);
  EXPECT_EQ(back->las_behind_seq, 40);
  EXPECT_TRUE(back->las_recalls);
  EXPECT_EQ(EncodeJob(*back), text);
}

TEST(RecordCodecTest, NodesSurviveARoundTrip) {
  NodeRecord node;
  node.name = "n1";
  node.agent_address = "10.0.0.1:7701";
  node.host = "10.0.0.1";
  node.inventory = {8, "H200", 141000, 96, 1 << 20, {{"switch", "s1"}, {"rack", "a"}}};
  node.state = NodeState::kDraining;
  node.last_heartbeat_unix = 1764600000;
  node.reason = "drained by admin";
  node.drain = true;
  node.unsandboxed = true;
  const std::string text = EncodeNode(node);
  EXPECT_EQ(text,
            R"({"node":{"name":"n1","agent_address":"10.0.0.1:7701","host":"10.0.0.1","inventory":{"gpus":8,)"
            R"("gpu_model":"H200","gpu_memory_mb":"141000","cpus":96,"memory_mb":"1048576","labels":{"rack":"a",)"
            R"("switch":"s1"}},"state":"NODE_DRAINING","last_heartbeat_unix":"1764600000","reason":"drained by admin",)"
            R"("unsandboxed":true},"drain":true})");
  absl::StatusOr<NodeRecord> back = DecodeNode(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(EncodeNode(*back), text);
  EXPECT_EQ(back->inventory.labels.at("switch"), "s1");
  EXPECT_EQ(back->state, NodeState::kDraining);
}

TEST(RecordCodecTest, BadRowsAreDataLoss) {
  auto message = [](const std::string& text) { return std::string(DecodeJob(text).status().message()); };
  EXPECT_EQ(message(R"({"job":{"state":"JOB_NOPE"}})"),
            R"(job record: (job.state): invalid value "JOB_NOPE" for type type.googleapis.com/athanor.rpc.JobState)");
  EXPECT_EQ(message(R"({"job":{"state":9}})"), "job record: job state 9 is not a known state");
  EXPECT_EQ(message(R"({"stop_outcome":-1})"), "job record: stop outcome: job state -1 is not a known state");
  EXPECT_EQ(message(R"({"job":{"attempt":4294967296}})"),
            "job record: (job.attempt): invalid value 4294967296 for type TYPE_INT32");
  EXPECT_EQ(message(R"({"job":{"avoid_nodes":[1,2]}})"),
            "job record: (job.avoid_nodes[1]): invalid value 2 for type TYPE_STRING");
  EXPECT_EQ(message(R"({"job":{"id":"4","allocation":[{"rank":1}],"ranks":[{"rank":1}]}})"),
            "job 4: ranks are not numbered 0..");
  EXPECT_EQ(message(R"({"bogus":1})"), "job record: bogus: Cannot find field.");
  EXPECT_EQ(message(R"({"job":{"id":"5"},"order_preemptions":-1})"),
            "job 5: queue marks out of range (queued at 0, -1 preemptions for order, behind seq 0)");
  EXPECT_EQ(message(R"({"job":{"id":"5"},"queued_at_unix":"NaN"})"),
            "job 5: queue marks out of range (queued at nan, 0 preemptions for order, behind seq 0)");
  EXPECT_EQ(message(R"({"job":{"id":"5"},"las_behind_seq":"-3"})"),
            "job 5: queue marks out of range (queued at 0, 0 preemptions for order, behind seq -3)");
  EXPECT_EQ(DecodeJob("{\"job\":").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(DecodeNode(R"({"node":{"state":6}})").status().message(), "node record: node state 6 is not a known state");
  EXPECT_EQ(DecodeJob(R"({"seq":"-7"})").value().seq, -7);
}

// The old rows (legacy_rows.h): flat JSON, states as the record's enum,
// usage, attempt nodes and spans as lists of lists.
TEST(LegacyRowsTest, OldJobRowsReadAsTheRecordTheyWrote) {
  absl::StatusOr<JobRecord> job = DecodeLegacyJob(
      R"({"id":"5","seq":5,"spec":{"name":"train","nodes":2,"env":{"A":"1"}},"state":4,"attempt":2,)"
      R"("allocation":[{"rank":0,"node":"n1","local_rank":0,"node_rank":0,"gpu_ids":[0,1]}],"allocated":false,)"
      R"("ranks":[{"rank":0,"started":true,"exited":true,"exit_code":0,"signal":0,"message":"done"}],)"
      R"("reason":"","committed_step":-1,"stopping":false,"stop_outcome":1,"preempt_deadline_unix":12.5,)"
      R"("usage":[[1.5,2.5,2]],"attempt_nodes":[["n1"],["n1","n2"]],"attempt_spans":[[1.5,2.5,"succeeded",""]],)"
      R"("telemetry":{"step":-1,"loss":0},"idempotency_key":"k","avoid_nodes":["n3"],)"
      R"("hang":{"attempt":0,"rank":-1,"node":"","reason":"","detected_unix":0,"stalled_s":0}})");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->id, "5");
  EXPECT_EQ(job->seq, 5);
  EXPECT_EQ(job->spec.nodes, 2);
  EXPECT_EQ(job->spec.env.at("A"), "1");
  EXPECT_EQ(job->state, JobState::kSucceeded);
  EXPECT_EQ(job->stop_outcome, JobState::kStarting);
  EXPECT_EQ(job->attempt, 2);
  EXPECT_EQ(job->allocation[0].gpu_ids, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(job->ranks[0].message, "done");
  EXPECT_EQ(job->committed_step, -1);
  EXPECT_EQ(job->preempt_deadline_unix, 12.5);
  EXPECT_EQ(job->usage[0].end, 2.5);
  EXPECT_EQ(job->usage[0].gpus, 2);
  EXPECT_EQ(job->attempt_nodes, (std::vector<std::vector<std::string>>{{"n1"}, {"n1", "n2"}}));
  EXPECT_EQ(job->attempt_spans[0].outcome, "succeeded");
  EXPECT_EQ(job->last_telemetry.step, -1);
  EXPECT_EQ(job->idempotency_key, "k");
  EXPECT_EQ(job->avoid_nodes, (std::vector<std::string>{"n3"}));
  EXPECT_EQ(job->hang.rank, -1);
  // A record from before most fields: the defaults.
  absl::StatusOr<JobRecord> old = DecodeLegacyJob(R"({"id":"6","seq":6,"state":0})");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->state, JobState::kPending);
  EXPECT_TRUE(old->avoid_nodes.empty());
  EXPECT_EQ(old->hang.attempt, 0);
}

TEST(LegacyRowsTest, BadOldRowsAreDataLoss) {
  auto message = [](const char* text) { return std::string(DecodeLegacyJob(text).status().message()); };
  EXPECT_EQ(message("not json"), "job record is not JSON");
  EXPECT_EQ(message(R"({"state":9})"), "job record: job state 10 is not a known state");
  EXPECT_EQ(message(R"({"state":33333333333333333330})"),
            "job record: (job.state): invalid value 3.3333333333333332e+19 for type "
            "type.googleapis.com/athanor.rpc.JobState");
  EXPECT_EQ(message(R"({"attempt":1.5})"), "job record: (job.attempt): invalid value 1.5 for type TYPE_INT32");
  EXPECT_EQ(message(R"({"usage":[[1,2]]})"), "job record: bad usage entry");
  EXPECT_EQ(message(R"({"attempt_spans":[[1,2,3,"x"]]})"),
            "job record: (attempt_spans[0].outcome): invalid value 3 for type TYPE_STRING");
  EXPECT_EQ(message(R"({"avoid_nodes":[1,2]})"), "job record: (job.avoid_nodes[1]): invalid value 2 for type TYPE_STRING");
  absl::StatusOr<NodeRecord> node = DecodeLegacyNode(
      R"({"name":"n1","agent_address":"a:1","host":"h","gpus":4,"gpu_model":"H200","gpu_memory_mb":80000,)"
      R"("cpus":8,"memory_mb":1000,"labels":{"rack":"r"},"state":4,"last_heartbeat_unix":9,"reason":"x",)"
      R"("drain":true,"unsandboxed":true})");
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->inventory.gpu_memory_mb, 80000);
  EXPECT_EQ(node->inventory.labels.at("rack"), "r");
  EXPECT_EQ(node->state, NodeState::kUnknown);
  EXPECT_EQ(node->last_heartbeat_unix, 9);
  EXPECT_TRUE(node->drain);
  EXPECT_TRUE(node->unsandboxed);
  EXPECT_EQ(DecodeLegacyNode(R"({"state":5})").status().message(), "node record: node state 6 is not a known state");
}

}  // namespace
}  // namespace athanor::coord
