// Security's records <-> the Security service's messages (proto/athanor.proto),
// both ways, one function per record and direction: the service answers with
// them and the rows (auth_rows.h) are made of them, so each field is mapped
// once. Pure; thread-safe.
#pragma once

#include "absl/status/status.h"
#include "coordinator/auth/auth_types.h"
#include "proto/athanor.pb.h"

namespace athanor::coord {

void ToProto(const TokenRecord& token, rpc::TokenInfo* out);
// InvalidArgument for a role other than "user" / "admin". The salt and hash
// are not on the wire: `out`'s are left as they are.
absl::Status FromProto(const rpc::TokenInfo& info, TokenRecord* out);

void ToProto(const TenantPolicy& policy, rpc::TenantPolicy* out);
TenantPolicy FromProto(const rpc::TenantPolicy& policy);

void ToProto(const StoreCredentials& creds, rpc::TenantCredentials* out);
StoreCredentials FromProto(const rpc::TenantCredentials& creds);

}  // namespace athanor::coord
