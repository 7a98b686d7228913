#include "coordinator/wire/proto_convert_hangs.h"

#include <cmath>
#include <string>

#include "common/progress_page.h"

namespace athanor::coord {
namespace {

double Sane(double ms) { return std::isfinite(ms) && ms >= 0 && ms < 1e12 ? ms : 0; }

}  // namespace

RankProgressView ProgressFromProto(const rpc::RankProgress& p) {
  RankProgressView v;
  v.seen = p.seen();
  v.stopped = p.stopped();
  if (!v.seen) return v;
  v.step = p.step() < -1 ? -1 : p.step();
  v.step_compute_ms = Sane(p.step_compute_ms());
  v.step_ms = Sane(p.step_ms());
  v.collective_seq = p.collective_seq();
  v.waiting_seq = p.waiting_seq();
  // Only the names the runtime writes; anything else from a rank is not shown.
  for (int op = 1; op <= static_cast<int>(ProgressOp::kLast); ++op) {
    const char* name = ProgressOpName(static_cast<ProgressOp>(op));
    if (p.waiting_op() == name) v.waiting_op = name;
  }
  v.update_unix_ms = p.update_unix_ms();
  return v;
}

void StragglersToProto(const std::vector<RankFlag>& flags,
                       google::protobuf::RepeatedPtrField<rpc::RankFlag>* out) {
  for (const RankFlag& f : flags) {
    rpc::RankFlag* r = out->Add();
    r->set_rank(f.rank);
    r->set_node(f.node);
    r->set_reason(f.reason);
    r->set_ratio(f.ratio);
  }
}

void HangsToProto(const JobRecord& job, rpc::Job* out) {
  StragglersToProto(job.stragglers, out->mutable_stragglers());
  for (const std::string& node : job.avoid_nodes) out->add_avoid_nodes(node);
  if (job.hang.attempt > 0) {
    rpc::HangReport* h = out->mutable_last_hang();
    h->set_attempt(job.hang.attempt);
    h->set_rank(job.hang.rank);
    h->set_node(job.hang.node);
    h->set_reason(job.hang.reason);
    h->set_detected_unix(job.hang.detected_unix);
    h->set_stalled_s(job.hang.stalled_s);
  }
}

}  // namespace athanor::coord
