// Conversions between the wire types (proto/athanor.proto) and the core's
// plain records (types.h). Only the gRPC services include this. Pure.
#pragma once

#include <vector>

#include "coordinator/model/state_types.h"
#include "coordinator/model/types.h"
#include "proto/athanor.pb.h"

namespace athanor::coord {

JobSpec FromProto(const rpc::JobSpec& p);
NodeRecord FromProto(const rpc::RegisterNodeRequest& p);
std::vector<RankReport> FromProto(
    const google::protobuf::RepeatedPtrField<rpc::RankReport>& reports);

void ToProto(const JobRecord& job, rpc::Job* out);
void ToProto(const NodeView& node, rpc::Node* out);
void ToProto(const DesiredRank& rank, rpc::RankSpec* out);
void ToProto(const TelemetryFigures& t, rpc::TelemetrySample* out);
TelemetryFigures FromProto(const rpc::TelemetrySample& p);

}  // namespace athanor::coord
