// Human and JSON renderings of the Coordinator API's messages for the
// `athanor` CLI. Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "proto/athanor.pb.h"

namespace athanor::cli {

// `text` with every C0 control character and DEL written as \xNN (bytes of
// UTF-8 past ASCII are kept), so that it cannot steer a terminal.
std::string EscapeControls(absl::string_view text);
// Left-aligned columns separated by two spaces; the first row is the header.
// Every cell is passed through EscapeControls.
std::string FormatTable(const std::vector<std::vector<std::string>>& rows);

std::string FormatJobs(const rpc::ListJobsResponse& jobs);
std::string FormatJob(const rpc::Job& job);  // key: value lines plus a rank table
std::string FormatNodes(const rpc::ListNodesResponse& nodes);
// TENANT/JOB/GPU-SECONDS/GPU-HOURS/IN USE table; tenant totals have JOB "*".
std::string FormatUsage(const rpc::UsageResponse& usage);
std::string FormatQuotas(const rpc::ListQuotasResponse& quotas);
// "job ID: STATE" then one "  - reason" line each.
std::string FormatWhy(const rpc::WhyPendingResponse& why);
// Every line of `data` prefixed with "[rank R] "; a final newline is added
// when the data lacks one.
std::string PrefixLines(int32_t rank, const std::string& data);

// Unix seconds as "2026-12-03T10:00:00Z" (UTC); 0 as "never".
std::string FormatUnixTime(int64_t unix_seconds);

// "PENDING", "UP", ... without the enum prefix.
std::string StateName(rpc::JobState s);
std::string StateName(rpc::NodeState s);

// One JSON object (proto field names, defaults printed), newline-terminated.
std::string ToJson(const google::protobuf::Message& m);

}  // namespace athanor::cli
