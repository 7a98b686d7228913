#include "coordinator/auth/auth_convert.h"

#include "absl/strings/str_cat.h"

namespace athanor::coord {

void ToProto(const TokenRecord& t, rpc::TokenInfo* out) {
  out->set_id(t.id);
  out->set_tenant(t.tenant);
  out->set_role(RoleName(t.role));
  out->set_created_unix(t.created_unix);
  out->set_expires_unix(t.expires_unix);
  out->set_revoked(t.revoked);
  out->set_description(t.description);
}

absl::Status FromProto(const rpc::TokenInfo& info, TokenRecord* out) {
  if (!ParseRole(info.role(), &out->role)) {
    return absl::InvalidArgumentError(
        absl::StrCat("role: '", info.role().substr(0, 64), "' is neither 'user' nor 'admin'"));
  }
  out->id = info.id();
  out->tenant = info.tenant();
  out->created_unix = info.created_unix();
  out->expires_unix = info.expires_unix();
  out->revoked = info.revoked();
  out->description = info.description();
  return absl::OkStatus();
}

void ToProto(const TenantPolicy& p, rpc::TenantPolicy* out) {
  out->set_tenant(p.tenant);
  out->set_max_priority(p.max_priority);
  out->set_max_volume_bytes(p.max_volume_bytes);
  out->set_max_volumes(p.max_volumes);
}

TenantPolicy FromProto(const rpc::TenantPolicy& p) {
  return {p.tenant(), p.max_priority(), p.max_volume_bytes(), p.max_volumes()};
}

void ToProto(const StoreCredentials& c, rpc::TenantCredentials* out) {
  out->set_access_key(c.access_key);
  out->set_secret_key(c.secret_key);
  out->set_session_token(c.session_token);
}

StoreCredentials FromProto(const rpc::TenantCredentials& c) {
  return {c.access_key(), c.secret_key(), c.session_token()};
}

}  // namespace athanor::coord
