// Rows as protobuf JSON: the one writer and reader of the state database's
// protobuf rows (store/record_codec.h, auth/auth_rows.h). One line, field
// names as in the .proto, enums by name, map keys sorted: equal messages give
// equal text, and `sqlite3 state.db 'select record from jobs'` stays readable.
// Pure; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include <google/protobuf/message.h>

#include "absl/status/status.h"

namespace athanor::coord {

std::string ToProtoJson(const google::protobuf::Message& row);
// DataLoss "`what` record: <the parser's reason>" when `text` is not JSON of
// `row`'s message (an unknown field included).
absl::Status FromProtoJson(const char* what, std::string_view text, google::protobuf::Message* row);
// A read row's conversion into its record (the FromProto of the message it
// embeds) as the row's error: OK stays OK, a failure is DataLoss "`what`
// record: <its message>", worded as FromProtoJson's.
absl::Status RowError(const char* what, const absl::Status& conversion);

}  // namespace athanor::coord
