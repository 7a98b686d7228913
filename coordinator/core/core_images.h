// CoreImages: images' commands and queries on the running coordinator.
// Commands run under the state lock and return once what they changed is
// durable (CoordinatorCore::Write); queries read one consistent view. Who
// may call what, and the content in the data store, are the RPC layer's
// business (rpc/images_service.h).
//
// Thread-safe, as the core is. The core is not owned and outlives this.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/core/cluster_images.h"
#include "coordinator/core/coordinator_core.h"

namespace athanor::coord {

class CoreImages {
 public:
  explicit CoreImages(CoordinatorCore* core) : core_(core) {}

  absl::StatusOr<ClusterImages::Recorded> Record(const rpc::Image& image, bool replace);
  absl::StatusOr<ClusterImages::Removed> Remove(const std::string& tenant, const std::string& name);

  // `tenant`'s own images and the public ones; `all`: every image.
  std::vector<rpc::Image> Visible(const std::string& tenant, bool all) const;
  // Every image of `tenant`.
  std::vector<rpc::Image> OfTenant(const std::string& tenant) const;
  // The tenant's own image of that name; NotFound naming it.
  absl::StatusOr<rpc::Image> Find(const std::string& tenant, const std::string& name) const;
  // Whether a record or a job not finished holds `digest`.
  bool DigestHeld(const std::string& digest) const;

 private:
  CoordinatorCore* const core_;
};

}  // namespace athanor::coord
