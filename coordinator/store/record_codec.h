// JSON encoding of the coordinator's records for the store. The encoding is
// the on-disk format: add fields freely (decoders default missing ones), never
// rename. Pure; thread-safe. Decoding errors are DataLoss naming the record.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "coordinator/model/types.h"

namespace athanor::coord {

std::string EncodeJob(const JobRecord& job);
absl::StatusOr<JobRecord> DecodeJob(const std::string& text);
std::string EncodeNode(const NodeRecord& node);
absl::StatusOr<NodeRecord> DecodeNode(const std::string& text);

}  // namespace athanor::coord
