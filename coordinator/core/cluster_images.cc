#include "coordinator/core/cluster_images.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "coordinator/core/cluster_state.h"

namespace athanor::coord {
namespace {

// Jobs named in a refusal; the rest are counted.
constexpr size_t kMaxNamedJobs = 10;

}  // namespace

void ClusterImages::Restore(std::vector<rpc::Image> images) { state_.images_.Restore(std::move(images)); }

absl::StatusOr<ClusterImages::Recorded> ClusterImages::Record(const rpc::Image& image, bool replace) {
  Recorded out;
  const rpc::Image* before = state_.images_.Find(image.tenant(), image.name());
  const std::string old_digest = before == nullptr ? "" : before->digest();
  RETURN_IF_ERROR(state_.images_.Put(image, replace));
  state_.log_.MarkImage(image, /*removed=*/false);
  out.image = image;
  if (!old_digest.empty() && old_digest != image.digest() && !DigestHeld(state_, old_digest)) {
    out.released_digest = old_digest;
  }
  return out;
}

absl::StatusOr<ClusterImages::Removed> ClusterImages::Remove(const std::string& tenant,
                                                             const std::string& name) {
  const rpc::Image* image = state_.images_.Find(tenant, name);
  if (image == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("tenant ", tenant.substr(0, 128), " has no image '", name.substr(0, 128), "'"));
  }
  std::vector<std::string> jobs = JobsRunning(state_, image->digest());
  if (!jobs.empty()) {
    const size_t more = jobs.size() > kMaxNamedJobs ? jobs.size() - kMaxNamedJobs : 0;
    jobs.resize(jobs.size() - more);
    return absl::FailedPreconditionError(absl::StrCat(
        "image '", name, "' of tenant ", tenant, " is in use by job(s) ", absl::StrJoin(jobs, ", "),
        more > 0 ? absl::StrCat(" and ", more, " more") : "", " (cancel them or wait until they end)"));
  }
  Removed out;
  ASSIGN_OR_RETURN(out.image, state_.images_.Remove(tenant, name));
  state_.log_.MarkImage(out.image, /*removed=*/true);
  out.blob_unused = !DigestHeld(state_, out.image.digest());
  return out;
}

void ClusterImages::SetCached(const std::string& node, std::vector<std::string> digests) {
  state_.nodes_.SetCachedImages(node, std::move(digests));
}

absl::StatusOr<std::string> ClusterImages::ResolveDigest(const std::string& tenant,
                                                         const std::string& name) const {
  ASSIGN_OR_RETURN(rpc::Image image, state_.images_.Resolve(tenant, name));
  return image.digest();
}

const ImageRegistry& ClusterImages::Registry(const ClusterState& state) { return state.images_; }

std::vector<std::string> ClusterImages::JobsRunning(const ClusterState& state, const std::string& digest) {
  std::vector<std::string> out;
  for (const auto& [seq, job] : state.jobs().all()) {
    if (!IsTerminal(job.state) && job.image_digest == digest) out.push_back(job.id);
  }
  return out;
}

bool ClusterImages::DigestHeld(const ClusterState& state, const std::string& digest) {
  return state.images_.HasDigest(digest) || !JobsRunning(state, digest).empty();
}

}  // namespace athanor::coord
