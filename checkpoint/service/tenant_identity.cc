#include "checkpoint/service/tenant_identity.h"

#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace athanor::ckptsvc {
namespace {

// The raw syscalls: per thread (glibc's wrappers of setgroups broadcast).
int ThreadSetGroups(const std::vector<gid_t>& groups) {
  return static_cast<int>(::syscall(SYS_setgroups, groups.size(), groups.data()));
}

void Restore(const std::vector<gid_t>& groups) {
  // The fsuid first: back to root's, it gives the thread back its file
  // capabilities. (setgroups needs CAP_SETGID, which no fsuid change drops.)
  ::setfsuid(::geteuid());
  ::setfsgid(::getegid());
  if (ThreadSetGroups(groups) != 0) {
    // Cannot happen for root; a thread left without its groups only loses access.
    ATHANOR_LOG(ERROR) << "restoring the upload thread's groups: " << strerror(errno);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<TenantFsIdentity>> TenantFsIdentity::Become(uid_t uid, gid_t gid) {
  if (uid == ::geteuid() && gid == ::getegid()) {
    return std::unique_ptr<TenantFsIdentity>(new TenantFsIdentity(false, {}));
  }
  int n = ::getgroups(0, nullptr);
  std::vector<gid_t> groups(n > 0 ? static_cast<size_t>(n) : 0);
  if (n > 0 && ::getgroups(n, groups.data()) != n) groups.clear();
  auto denied = [&](const char* what) {
    absl::Status s = absl::PermissionDeniedError(absl::StrCat(
        "the checkpoint service cannot act as uid ", uid, " gid ", gid, " (", what,
        "); it must run as root to serve other users' ranks"));
    Restore(groups);
    return s;
  };
  if (ThreadSetGroups({}) != 0) return denied("setgroups");
  ::setfsgid(gid);
  if (static_cast<gid_t>(::setfsgid(static_cast<gid_t>(-1))) != gid) return denied("setfsgid");
  ::setfsuid(uid);
  if (static_cast<uid_t>(::setfsuid(static_cast<uid_t>(-1))) != uid) return denied("setfsuid");
  return std::unique_ptr<TenantFsIdentity>(new TenantFsIdentity(true, std::move(groups)));
}

TenantFsIdentity::~TenantFsIdentity() {
  if (switched_) Restore(groups_);
}

}  // namespace athanor::ckptsvc
