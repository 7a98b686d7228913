// ImageRegistry: the coordinator's records of environment images
// (proto/athanor_data.proto, Image), keyed by (tenant, name). Pure logic: it
// holds the records and answers who may run which; the content lives in the
// data store under ImageBlobKey(digest), and core/cluster_images.h wires the
// registry into the coordinator's state (persistence, the jobs using an image).
//
// Visibility: a tenant sees its own images and the public ones; an admin
// sees every image. A job names an image by name alone: the tenant's own
// image of that name wins, else a public one (the first by tenant, when
// several tenants published the same name).
//
// Not thread-safe: confined to ClusterState's owner, as the state is.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/athanor_data.pb.h"

namespace athanor::coord {

// "sha256:" and 64 lowercase hex digits; InvalidArgument naming `field` otherwise.
absl::Status ValidateImageDigest(const std::string& field, const std::string& digest);
// Where an image's tar lives in the data store: "images/sha256/<hex>.tar".
// `digest` must be valid (ValidateImageDigest).
std::string ImageBlobKey(const std::string& digest);

class ImageRegistry {
 public:
  // What the store held; a later record of the same key replaces an earlier one.
  void Restore(std::vector<rpc::Image> images);

  // Adds `image` (name and digest valid, checked here). AlreadyExists naming
  // the image when the tenant has one of that name and `replace` is false.
  absl::Status Put(const rpc::Image& image, bool replace);
  // Removes the tenant's image; NotFound naming it when there is none.
  absl::StatusOr<rpc::Image> Remove(const std::string& tenant, const std::string& name);

  // The tenant's own image of that name, or null.
  const rpc::Image* Find(const std::string& tenant, const std::string& name) const;
  // The image a job of `tenant` naming `name` runs: its own, else a public
  // one. InvalidArgument naming the image when there is neither.
  absl::StatusOr<rpc::Image> Resolve(const std::string& tenant, const std::string& name) const;
  // `tenant`'s own images and every public one; `all`: every image. By
  // (tenant, name).
  std::vector<rpc::Image> Visible(const std::string& tenant, bool all) const;
  // Every image of `tenant` (an admin's listing of one tenant), by name.
  std::vector<rpc::Image> OfTenant(const std::string& tenant) const;
  // Whether any record holds `digest` (its blob is still needed).
  bool HasDigest(const std::string& digest) const;
  size_t size() const { return images_.size(); }

 private:
  std::map<std::pair<std::string, std::string>, rpc::Image> images_;  // (tenant, name)
};

}  // namespace athanor::coord
