// Conversions of the hang/straggler fields between protobuf and the
// coordinator's records (proto_convert.h does the rest). Pure functions.
#pragma once

#include "coordinator/model/types.h"
#include "proto/athanor.pb.h"

namespace athanor::coord {

// A rank's progress as its agent sent it; values a rank could not have
// written (negative times, NaN) are dropped rather than trusted.
RankProgressView ProgressFromProto(const rpc::RankProgress& p);
// The newest hang, both ways (a job's record keeps it: RecordToProto).
void ToProto(const HangRecord& hang, rpc::HangReport* out);
HangRecord FromProto(const rpc::HangReport& p);
// Straggler flags into a Job's or a JobStatus's list.
void StragglersToProto(const std::vector<RankFlag>& flags,
                       google::protobuf::RepeatedPtrField<rpc::RankFlag>* out);

}  // namespace athanor::coord
