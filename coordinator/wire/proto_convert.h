// Conversions between the wire types (proto/athanor.proto) and the core's
// plain records (types.h). Pure.
//
// Each field a record shares with a message is mapped here once, both ways:
// the gRPC services use these, and the store's rows (proto/athanor_store.proto)
// embed the same messages and convert through the same functions
// (store/record_codec.cc), so a new field is added to the .proto, the struct
// and the two functions below that carry it, nowhere else.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/model/state_types.h"
#include "coordinator/model/types.h"
#include "proto/athanor.pb.h"

namespace athanor::coord {

// Enums. The wire's UNSPECIFIED reads as `if_unset`; a value past the enum
// (a message from a newer peer, a hand-edited row) is DataLoss.
rpc::JobState ToProto(JobState s);
absl::StatusOr<JobState> FromProto(rpc::JobState s, JobState if_unset);
rpc::NodeState ToProto(NodeState s);
absl::StatusOr<NodeState> FromProto(rpc::NodeState s, NodeState if_unset);

void ToProto(const JobSpec& spec, rpc::JobSpec* out);
JobSpec FromProto(const rpc::JobSpec& p);
void ToProto(const VolumeMount& v, rpc::VolumeMount* out);
VolumeMount FromProto(const rpc::VolumeMount& p);
void ToProto(const NodeInventory& inv, rpc::NodeInventory* out);
NodeInventory FromProto(const rpc::NodeInventory& p);
void ToProto(const TelemetryFigures& t, rpc::TelemetrySample* out);
TelemetryFigures FromProto(const rpc::TelemetrySample& p);

// The fields of a record its message keeps (what the store writes): the
// record's own values, no views.
void RecordToProto(const JobRecord& job, rpc::Job* out);
absl::Status RecordFromProto(const rpc::Job& p, JobRecord* out);
void RecordToProto(const NodeRecord& node, rpc::Node* out);
absl::Status RecordFromProto(const rpc::Node& p, NodeRecord* out);

// What clients are shown: the record and its views (GPU time, attempts,
// stragglers, "stopping: ..." reasons, allocated GPUs and jobs of a node).
void ToProto(const JobRecord& job, rpc::Job* out);
void ToProto(const NodeView& node, rpc::Node* out);
void ToProto(const DesiredRank& rank, rpc::RankSpec* out);

NodeRecord FromProto(const rpc::RegisterNodeRequest& p);
std::vector<RankReport> FromProto(
    const google::protobuf::RepeatedPtrField<rpc::RankReport>& reports);

}  // namespace athanor::coord
