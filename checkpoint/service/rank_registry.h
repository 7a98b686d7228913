// RankRegistry: which ranks the node agent started, as the node checkpoint
// service learns them (docs/security.md, "Attack surface"). The agent
// registers each rank before it starts it (job, attempt, rank, the uid it
// runs as, the job's checkpoint root) and unregisters it once it has ended;
// the service refuses a stage that disagrees with the registration of the
// job, attempt and rank it names, or names one that is not registered.
//
// The channel is a folder only the agent's and the service's user (root) can
// reach: DIR is 0700 and each registration a 0600 file in it, written whole
// (a temporary file renamed into place) and read without following links,
// owner and mode checked. Ranks (tenant uids) can neither read nor write it,
// though the service's folder around it is bound into their sandboxes. A file
// per rank also outlives a restart of the service, which thus keeps knowing
// the ranks that run.
//
// Thread model: thread-safe (every call works on the folder alone).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace athanor::ckptsvc {

struct RankBinding {
  std::string job;
  int32_t attempt = 0, rank = 0;
  uid_t uid = 0;        // the rank's (SO_PEERCRED of its connection must match)
  std::string uri;      // the job's checkpoint root (ATHANOR_CHECKPOINT_URI)
  int32_t keep_last = 0;  // retention the rank may ask for; 0: not fixed by the agent
};

class RankRegistry {
 public:
  // Opens `dir`, made 0700 when missing. FailedPrecondition when it is a
  // link, or not a folder of this process's euid that no one else may enter.
  static absl::StatusOr<std::unique_ptr<RankRegistry>> Open(const std::string& dir);
  ~RankRegistry();

  // InvalidArgument for a job id that is not a safe file name or a negative
  // attempt or rank.
  absl::Status Register(const RankBinding& binding);
  // Removes every registration (an agent starting: none of its ranks runs).
  absl::Status Clear();
  // OK when it was not registered.
  absl::Status Unregister(const std::string& job, int32_t attempt, int32_t rank);
  // NotFound when it is not registered; FailedPrecondition when its entry is
  // not a regular 0600 file of this process's euid, or does not parse.
  absl::StatusOr<RankBinding> Lookup(const std::string& job, int32_t attempt, int32_t rank) const;

 private:
  RankRegistry(std::string dir, int dir_fd) : dir_(std::move(dir)), dir_fd_(dir_fd) {}
  const std::string dir_;
  const int dir_fd_;
};

}  // namespace athanor::ckptsvc
