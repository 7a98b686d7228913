#include "coordinator/store/record_codec.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "coordinator/wire/proto_convert.h"
#include "coordinator/wire/proto_json.h"
#include "proto/athanor_store.pb.h"

namespace athanor::coord {

std::string EncodeJob(const JobRecord& job) {
  store::JobRow row;
  RecordToProto(job, row.mutable_job());
  row.set_seq(job.seq);
  row.set_idempotency_key(job.idempotency_key);
  row.set_allocated(job.allocated);
  row.set_stopping(job.stopping);
  row.set_stop_outcome(ToProto(job.stop_outcome));
  row.set_stop_reason(job.stop_reason);
  row.set_preempted(job.preempted);
  row.set_stop_kill_after_ms(job.stop_kill_after_ms);
  row.set_preempt_deadline_unix(job.preempt_deadline_unix);
  row.set_last_checkpoint_unix(job.last_checkpoint_unix);
  for (const UsageInterval& u : job.usage) {
    store::UsageInterval* r = row.add_usage();
    r->set_start(u.start);
    r->set_end(u.end);
    r->set_gpus(u.gpus);
  }
  for (const std::vector<std::string>& nodes : job.attempt_nodes) {
    row.add_attempt_nodes()->mutable_nodes()->Add(nodes.begin(), nodes.end());
  }
  for (const AttemptSpan& a : job.attempt_spans) {
    store::AttemptSpan* r = row.add_attempt_spans();
    r->set_start(a.start);
    r->set_end(a.end);
    r->set_outcome(a.outcome);
    r->set_reason(a.reason);
    r->set_platform_fault(a.platform_fault);
    r->set_steps_lost(a.steps_lost);
  }
  row.set_last_active_unix(job.last_active_unix);
  row.set_idle_warned(job.idle_warned);
  row.set_stop_platform_fault(job.stop_platform_fault);
  row.set_stop_resize(job.stop_resize);
  row.set_image_digest(job.image_digest);
  row.set_network_subnet(job.network_subnet);
  row.set_queued_at_unix(job.queued_at_unix);
  row.set_order_preemptions(job.order_preemptions);
  row.set_las_behind_seq(job.las_behind_seq);
  row.set_las_recalls(job.las_recalls);
  return ToProtoJson(row);
}

absl::StatusOr<JobRecord> DecodeJob(std::string_view text) {
  store::JobRow row;
  RETURN_IF_ERROR(FromProtoJson("job", text, &row));
  JobRecord job;
  RETURN_IF_ERROR(RowError("job", RecordFromProto(row.job(), &job)));
  job.seq = row.seq();
  job.idempotency_key = row.idempotency_key();
  job.allocated = row.allocated();
  job.stopping = row.stopping();
  absl::StatusOr<JobState> outcome = FromProto(row.stop_outcome(), JobState::kFailed);
  if (!outcome.ok()) return absl::DataLossError(absl::StrCat("job record: stop outcome: ", outcome.status().message()));
  job.stop_outcome = *outcome;
  job.stop_reason = row.stop_reason();
  job.preempted = row.preempted();
  job.stop_kill_after_ms = row.stop_kill_after_ms();
  job.preempt_deadline_unix = row.preempt_deadline_unix();
  job.last_checkpoint_unix = row.last_checkpoint_unix();
  for (const store::UsageInterval& u : row.usage()) job.usage.push_back({u.start(), u.end(), u.gpus()});
  for (const store::AttemptNodeList& a : row.attempt_nodes()) job.attempt_nodes.emplace_back(a.nodes().begin(), a.nodes().end());
  for (const store::AttemptSpan& a : row.attempt_spans()) {
    job.attempt_spans.push_back({a.start(), a.end(), a.outcome(), a.reason(), a.platform_fault(), a.steps_lost()});
  }
  job.last_active_unix = row.last_active_unix();
  job.idle_warned = row.idle_warned();
  job.stop_platform_fault = row.stop_platform_fault();
  job.stop_resize = row.stop_resize();
  job.image_digest = row.image_digest();
  job.network_subnet = row.network_subnet();
  if (!std::isfinite(row.queued_at_unix()) || row.queued_at_unix() < 0 || row.order_preemptions() < 0 ||
      row.las_behind_seq() < 0) {
    return absl::DataLossError(absl::StrCat("job ", job.id, ": queue marks out of range (queued at ",
                                            row.queued_at_unix(), ", ", row.order_preemptions(),
                                            " preemptions for order, behind seq ", row.las_behind_seq(), ")"));
  }
  job.queued_at_unix = row.queued_at_unix();
  job.order_preemptions = row.order_preemptions();
  job.las_behind_seq = row.las_behind_seq();
  job.las_recalls = row.las_recalls();
  if (job.ranks.size() != job.allocation.size()) {
    return absl::DataLossError(absl::StrCat("job ", job.id, ": ranks and allocation disagree"));
  }
  for (size_t i = 0; i < job.allocation.size(); ++i) {
    if (job.allocation[i].rank != static_cast<int32_t>(i) || job.ranks[i].rank != static_cast<int32_t>(i)) {
      return absl::DataLossError(absl::StrCat("job ", job.id, ": ranks are not numbered 0.."));
    }
  }
  return job;
}

std::string EncodeNode(const NodeRecord& node) {
  store::NodeRow row;
  RecordToProto(node, row.mutable_node());
  row.set_drain(node.drain);
  return ToProtoJson(row);
}

absl::StatusOr<NodeRecord> DecodeNode(std::string_view text) {
  store::NodeRow row;
  RETURN_IF_ERROR(FromProtoJson("node", text, &row));
  NodeRecord node;
  RETURN_IF_ERROR(RowError("node", RecordFromProto(row.node(), &node)));
  node.drain = row.drain();
  return node;
}

std::string EncodeBillingRow(const google::protobuf::Message& row) { return ToProtoJson(row); }

absl::Status DecodeBillingRow(const char* what, std::string_view text,
                              google::protobuf::Message* row) {
  return FromProtoJson(what, text, row);
}

}  // namespace athanor::coord
