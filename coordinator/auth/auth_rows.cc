#include "coordinator/auth/auth_rows.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "coordinator/auth/auth_convert.h"
#include "coordinator/wire/proto_json.h"
#include "proto/athanor_store.pb.h"

namespace athanor::coord {

std::string EncodeToken(const TokenRecord& token) {
  store::TokenRow row;
  ToProto(token, row.mutable_info());
  row.set_salt(token.salt);
  row.set_hash(token.hash);
  return ToProtoJson(row);
}

absl::StatusOr<TokenRecord> DecodeToken(std::string_view text) {
  store::TokenRow row;
  RETURN_IF_ERROR(FromProtoJson("token", text, &row));
  TokenRecord token;
  RETURN_IF_ERROR(RowError("token", FromProto(row.info(), &token)));
  if (token.id.empty()) return absl::DataLossError("token record: no id");
  token.salt = row.salt();
  token.hash = row.hash();
  return token;
}

std::string EncodeTenantPolicy(const TenantPolicy& policy) {
  rpc::TenantPolicy row;
  ToProto(policy, &row);
  return ToProtoJson(row);
}

absl::StatusOr<TenantPolicy> DecodeTenantPolicy(std::string_view text) {
  rpc::TenantPolicy row;
  RETURN_IF_ERROR(FromProtoJson("tenant policy", text, &row));
  if (row.tenant().empty()) return absl::DataLossError("tenant policy record: no tenant");
  return FromProto(row);
}

std::string EncodeCredentials(const StoreCredentials& creds) {
  rpc::TenantCredentials row;
  ToProto(creds, &row);
  return ToProtoJson(row);
}

absl::StatusOr<StoreCredentials> DecodeCredentials(std::string_view text) {
  rpc::TenantCredentials row;
  RETURN_IF_ERROR(FromProtoJson("credentials", text, &row));
  return FromProto(row);
}

}  // namespace athanor::coord
