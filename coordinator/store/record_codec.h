// The coordinator's records as rows of the state database: the messages of
// proto/athanor_store.proto, written as protobuf JSON (wire/proto_json.h: one
// line, field names as in the .proto, enums by name, map keys sorted: equal
// records give equal text).
//
// A row embeds the wire's messages for what the wire carries and converts
// them with wire/proto_convert.h; only the store's own fields are mapped in
// record_codec.cc. Add fields to the .proto (never renumber or rename).
// Pure; thread-safe. A row that does not parse, or holds a value out of
// range, is DataLoss ("job record: ..."); the store adds which row.
#pragma once

#include <string>
#include <string_view>

#include <google/protobuf/message.h>

#include "absl/status/statusor.h"
#include "coordinator/model/types.h"

namespace athanor::coord {

std::string EncodeJob(const JobRecord& job);
absl::StatusOr<JobRecord> DecodeJob(std::string_view text);
std::string EncodeNode(const NodeRecord& node);
absl::StatusOr<NodeRecord> DecodeNode(std::string_view text);
// Billing's rows are its records themselves (proto/athanor_billing.proto):
// a price, a plan, a ledger entry. DataLoss naming `what` on a bad row.
std::string EncodeBillingRow(const google::protobuf::Message& row);
absl::Status DecodeBillingRow(const char* what, std::string_view text,
                              google::protobuf::Message* row);

}  // namespace athanor::coord
