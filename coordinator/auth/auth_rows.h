// Security's records as rows of the state database, written as protobuf JSON
// (wire/proto_json.h) like the jobs' and nodes' (store/record_codec.h):
//   tokens           store::TokenRow (proto/athanor_store.proto): the wire's
//                    TokenInfo and the secret's salt and hash
//   tenant_policies  the wire's rpc::TenantPolicy
//   tenant_secrets   the wire's rpc::TenantCredentials, sealed (secret_store.h)
// Fields map through auth_convert.h. Old token rows are read by
// legacy_auth_rows.h; old policies and credentials already read here (their
// hand JSON had the field names of these messages).
// Pure; thread-safe. A row that does not parse, or names an unknown role or
// no id/tenant, is DataLoss ("token record: ..."); the caller adds which row.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "coordinator/auth/auth_types.h"

namespace athanor::coord {

std::string EncodeToken(const TokenRecord& token);
absl::StatusOr<TokenRecord> DecodeToken(std::string_view text);
std::string EncodeTenantPolicy(const TenantPolicy& policy);
absl::StatusOr<TenantPolicy> DecodeTenantPolicy(std::string_view text);
// The plaintext SecretStore seals.
std::string EncodeCredentials(const StoreCredentials& creds);
absl::StatusOr<StoreCredentials> DecodeCredentials(std::string_view text);

}  // namespace athanor::coord
