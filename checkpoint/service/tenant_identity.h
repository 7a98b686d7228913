// TenantFsIdentity: runs this thread's file-system access as a rank's uid.
//
// The service runs as root, but what it writes under a job's store (a
// file:// root the rank chose, a credentials or CA file an AWS_* variable
// names) must be what the rank itself could write or read. Linux keeps the
// file-system uid/gid and the supplementary groups per thread (the raw
// syscalls; glibc's setgroups would change every thread), so an upload thread
// takes the rank's identity while it opens the store and uploads, and the
// rest of the service keeps root's. A fsuid other than 0 also drops the
// thread's file capabilities (CAP_DAC_OVERRIDE and the like).
//
// Not copyable; confined to the thread that made it, which it restores on
// destruction.
#pragma once

#include <sys/types.h>

#include <memory>
#include <vector>

#include "absl/status/statusor.h"

namespace athanor::ckptsvc {

class TenantFsIdentity {
 public:
  // Takes `uid`/`gid` (no supplementary groups) for this thread's file
  // access. Nothing to do when they already are the process's effective ids.
  // PermissionDenied when the process may not switch (not root): the caller
  // must then not touch the rank's paths.
  static absl::StatusOr<std::unique_ptr<TenantFsIdentity>> Become(uid_t uid, gid_t gid);
  ~TenantFsIdentity();
  TenantFsIdentity(const TenantFsIdentity&) = delete;
  TenantFsIdentity& operator=(const TenantFsIdentity&) = delete;

 private:
  TenantFsIdentity(bool switched, std::vector<gid_t> groups)
      : switched_(switched), groups_(std::move(groups)) {}
  const bool switched_;
  const std::vector<gid_t> groups_;  // the thread's supplementary groups before
};

}  // namespace athanor::ckptsvc
