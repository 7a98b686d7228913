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

void ToProto(const HangRecord& hang, rpc::HangReport* out) {
  out->set_attempt(hang.attempt);
  out->set_rank(hang.rank);
  out->set_node(hang.node);
  out->set_reason(hang.reason);
  out->set_detected_unix(hang.detected_unix);
  out->set_stalled_s(hang.stalled_s);
}

HangRecord FromProto(const rpc::HangReport& p) {
  return HangRecord{p.attempt(), p.rank(), p.node(), p.reason(), p.detected_unix(), p.stalled_s()};
}

}  // namespace athanor::coord
