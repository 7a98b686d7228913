// Reading the old format: the hand-written JSON token rows of releases up to
// 0ca114a, flat objects ({"id", "tenant", "role", "salt", "hash", "created",
// "expires", "revoked", "description"}). Each is rewritten into the row of
// auth_rows.h and decoded from there, so the old format is read in this one
// place and never written. TokenStore calls these when it opens the
// database and writes every old row back in the new format, once.
// (Old tenant policies and sealed credentials need nothing here: their JSON
// is already that of rpc::TenantPolicy and rpc::TenantCredentials.)
// Pure; thread-safe.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "coordinator/auth/auth_types.h"

namespace athanor::coord {

// Whether `text` is an old token row: a JSON object with the token's id at
// its top (a new row keeps it in "info").
bool IsLegacyTokenRow(std::string_view text);
// DataLoss when it does not read.
absl::StatusOr<TokenRecord> DecodeLegacyToken(std::string_view text);

}  // namespace athanor::coord
