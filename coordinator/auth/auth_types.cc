#include "coordinator/auth/auth_types.h"

#include "absl/strings/str_cat.h"

namespace athanor::coord {

const char* RoleName(Role r) {
  switch (r) {
    case Role::kUser: return "user";
    case Role::kAdmin: return "admin";
    case Role::kNone: break;
  }
  return "none";
}

bool ParseRole(const std::string& text, Role* out) {
  if (text == "user") *out = Role::kUser;
  else if (text == "admin") *out = Role::kAdmin;
  else return false;
  return true;
}

std::string Identity::Describe() const {
  if (insecure) return "insecure";
  std::string who;
  if (role != Role::kNone) {
    who = absl::StrCat(RoleName(role), " ", tenant, " (token ", token_id, ")");
  }
  if (!node.empty()) absl::StrAppend(&who, who.empty() ? "" : ", ", "agent ", node);
  return who.empty() ? "anonymous" : who;
}

}  // namespace athanor::coord
