// Reading the old format: the hand-written JSON rows of releases up to
// 0ca114a (state databases of user_version 0). Each row is rewritten into
// the row of record_codec.h and decoded from there, so the old format is
// read in this one place and never written. SqliteStore calls these once,
// when it opens such a database, and writes every row back in the new
// format. Pure; thread-safe. A row that does not read is DataLoss.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "coordinator/model/types.h"

namespace athanor::coord {

absl::StatusOr<JobRecord> DecodeLegacyJob(std::string_view text);
absl::StatusOr<NodeRecord> DecodeLegacyNode(std::string_view text);

}  // namespace athanor::coord
