#include "coordinator/auth/legacy_auth_rows.h"

#include <nlohmann/json.hpp>

#include "coordinator/auth/auth_rows.h"

namespace athanor::coord {

using nlohmann::json;

bool IsLegacyTokenRow(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.contains("id");
}

absl::StatusOr<TokenRecord> DecodeLegacyToken(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return absl::DataLossError("token record is not JSON");
  json info = json::object();
  for (const char* key : {"id", "tenant", "role", "revoked", "description"}) {
    if (auto it = j.find(key); it != j.end()) info[key] = std::move(*it);
  }
  if (auto it = j.find("created"); it != j.end()) info["created_unix"] = std::move(*it);
  if (auto it = j.find("expires"); it != j.end()) info["expires_unix"] = std::move(*it);
  json row{{"info", std::move(info)}};
  for (const char* key : {"salt", "hash"}) {
    if (auto it = j.find(key); it != j.end()) row[key] = std::move(*it);
  }
  return DecodeToken(row.dump());
}

}  // namespace athanor::coord
