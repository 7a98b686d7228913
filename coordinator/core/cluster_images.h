// ClusterImages: environment images on the cluster state. A facet of
// ClusterState (ClusterState::images()), like ClusterBilling: it keeps the
// ImageRegistry's records durable (each change is marked in the ChangeLog
// and written in the same commit as the operation's other records), resolves
// a submitted job's image to the digest the job will run, and refuses to
// remove an image a queued or running job runs.
//
// The content (the tar in the data store) is the RPC layer's business: this
// says only when a digest is no longer needed by any record or live job.
//
// Not thread-safe, as ClusterState: the owner serialises calls. Holds the
// state by reference: use it at once, never keep it.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/images/image_registry.h"
#include "proto/athanor_data.pb.h"

namespace athanor::coord {

class ClusterState;

class ClusterImages {
 public:
  explicit ClusterImages(ClusterState& state) : state_(state) {}

  // The store's records (after a restart); nothing is marked.
  void Restore(std::vector<rpc::Image> images);

  struct Recorded {
    rpc::Image image;
    // The digest the record replaced, when no record and no live job holds
    // it any more (its blob may go); "" otherwise.
    std::string released_digest;
  };
  // Records `image` (ImageRegistry::Put's checks and errors).
  absl::StatusOr<Recorded> Record(const rpc::Image& image, bool replace);

  struct Removed {
    rpc::Image image;
    bool blob_unused = false;  // no other record and no live job holds its digest
  };
  // NotFound for an unknown image; FailedPrecondition naming the jobs while
  // a job that is not finished runs its digest.
  absl::StatusOr<Removed> Remove(const std::string& tenant, const std::string& name);

  // The digests `node`'s agent has cached (its heartbeat's cached_images):
  // shown in the node's view, and a placement tie-break (scheduler's
  // MemberNode::cached_images, their one home).
  void SetCached(const std::string& node, std::vector<std::string> digests);

  // The digest a job of `tenant` naming image `name` runs (ImageRegistry::Resolve).
  absl::StatusOr<std::string> ResolveDigest(const std::string& tenant, const std::string& name) const;

  // ---- reads, over a const state
  static const ImageRegistry& Registry(const ClusterState& state);
  // Ids of the jobs not finished whose attempts run `digest`, by submission.
  static std::vector<std::string> JobsRunning(const ClusterState& state, const std::string& digest);
  // Whether a record or a job not finished holds `digest`.
  static bool DigestHeld(const ClusterState& state, const std::string& digest);

 private:
  ClusterState& state_;
};

}  // namespace athanor::coord
