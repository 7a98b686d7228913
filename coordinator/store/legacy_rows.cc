#include "coordinator/store/legacy_rows.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "coordinator/store/record_codec.h"
#include "proto/athanor.pb.h"
#include "proto/athanor_store.pb.h"

namespace athanor::coord {
namespace {

using nlohmann::json;

// The old rows were flat: every key that names a field of the wire's
// message (rpc::Job, rpc::Node, rpc::NodeInventory) and none of the row's
// own moves into that message; the rest stay with the row.
void MoveWireFields(json& from, const google::protobuf::Descriptor& row,
                    const google::protobuf::Descriptor& message, json& into) {
  for (auto it = from.begin(); it != from.end();) {
    if (row.FindFieldByName(it.key()) == nullptr && message.FindFieldByName(it.key()) != nullptr) {
      into[it.key()] = std::move(it.value());
      it = from.erase(it);
    } else {
      ++it;
    }
  }
}

void Rename(json& j, const char* from, const char* to) {
  if (auto it = j.find(from); it != j.end()) {
    j[to] = std::move(*it);
    j.erase(from);
  }
}

// Old states were the record's enum; the wire's are one past (UNSPECIFIED).
void ShiftState(json& j, const char* key) {
  if (auto it = j.find(key); it != j.end() && it->is_number_integer() && it->get<int64_t>() >= 0) {
    *it = it->get<int64_t>() + 1;
  }
}

// [[a, b, ...], ...] -> [{"names[0]": a, "names[1]": b, ...}, ...]
void TuplesToObjects(json& j, const char* key, std::initializer_list<const char*> names) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return;  // the parser says what is wrong
  for (json& entry : *it) {
    if (!entry.is_array() || entry.size() != names.size()) {
      throw std::invalid_argument(absl::StrCat("bad ", key, " entry"));
    }
    json object = json::object();
    size_t i = 0;
    for (const char* name : names) object[name] = std::move(entry[i++]);
    entry = std::move(object);
  }
}

absl::StatusOr<json> Parse(const char* what, std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return absl::DataLossError(absl::StrCat(what, " record is not JSON"));
  return j;
}

}  // namespace

absl::StatusOr<JobRecord> DecodeLegacyJob(std::string_view text) {
  absl::StatusOr<json> row = Parse("job", text);
  if (!row.ok()) return row.status();
  try {
    json& j = *row;
    Rename(j, "telemetry", "last_telemetry");
    Rename(j, "hang", "last_hang");
    json job = json::object();
    MoveWireFields(j, *store::JobRow::descriptor(), *rpc::Job::descriptor(), job);
    ShiftState(job, "state");
    ShiftState(j, "stop_outcome");
    TuplesToObjects(j, "usage", {"start", "end", "gpus"});
    TuplesToObjects(j, "attempt_spans", {"start", "end", "outcome", "reason"});
    if (auto it = j.find("attempt_nodes"); it != j.end() && it->is_array()) {
      for (json& nodes : *it) nodes = json{{"nodes", std::move(nodes)}};
    }
    j["job"] = std::move(job);
    return DecodeJob(j.dump());
  } catch (const std::exception& e) {
    return absl::DataLossError(absl::StrCat("job record: ", e.what()));
  }
}

absl::StatusOr<NodeRecord> DecodeLegacyNode(std::string_view text) {
  absl::StatusOr<json> row = Parse("node", text);
  if (!row.ok()) return row.status();
  try {
    json& j = *row;
    json node = json::object();
    json inventory = json::object();
    MoveWireFields(j, *store::NodeRow::descriptor(), *rpc::NodeInventory::descriptor(), inventory);
    MoveWireFields(j, *store::NodeRow::descriptor(), *rpc::Node::descriptor(), node);
    ShiftState(node, "state");
    node["inventory"] = std::move(inventory);
    j["node"] = std::move(node);
    return DecodeNode(j.dump());
  } catch (const std::exception& e) {
    return absl::DataLossError(absl::StrCat("node record: ", e.what()));
  }
}

}  // namespace athanor::coord
