#include "coordinator/core/core_images.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "coordinator/core/cluster_state.h"

namespace athanor::coord {

absl::StatusOr<ClusterImages::Recorded> CoreImages::Record(const rpc::Image& image, bool replace) {
  ClusterImages::Recorded out;
  RETURN_IF_ERROR(core_->Write([&](ClusterState& s) -> absl::Status {
    ASSIGN_OR_RETURN(out, s.images().Record(image, replace));
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<ClusterImages::Removed> CoreImages::Remove(const std::string& tenant,
                                                          const std::string& name) {
  ClusterImages::Removed out;
  RETURN_IF_ERROR(core_->Write([&](ClusterState& s) -> absl::Status {
    ASSIGN_OR_RETURN(out, s.images().Remove(tenant, name));
    return absl::OkStatus();
  }));
  return out;
}

std::vector<rpc::Image> CoreImages::Visible(const std::string& tenant, bool all) const {
  std::vector<rpc::Image> out;
  core_->Read([&](const ClusterState& s) { out = ClusterImages::Registry(s).Visible(tenant, all); });
  return out;
}

std::vector<rpc::Image> CoreImages::OfTenant(const std::string& tenant) const {
  std::vector<rpc::Image> out;
  core_->Read([&](const ClusterState& s) { out = ClusterImages::Registry(s).OfTenant(tenant); });
  return out;
}

absl::StatusOr<rpc::Image> CoreImages::Find(const std::string& tenant, const std::string& name) const {
  absl::StatusOr<rpc::Image> out;
  core_->Read([&](const ClusterState& s) {
    const rpc::Image* image = ClusterImages::Registry(s).Find(tenant, name);
    out = image != nullptr ? absl::StatusOr<rpc::Image>(*image)
                           : absl::NotFoundError(absl::StrCat("tenant ", tenant.substr(0, 128),
                                                              " has no image '", name.substr(0, 128), "'"));
  });
  return out;
}

bool CoreImages::DigestHeld(const std::string& digest) const {
  bool out = false;
  core_->Read([&](const ClusterState& s) { out = ClusterImages::DigestHeld(s, digest); });
  return out;
}

}  // namespace athanor::coord
