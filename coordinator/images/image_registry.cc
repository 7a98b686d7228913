#include "coordinator/images/image_registry.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "coordinator/model/validation.h"

namespace athanor::coord {
namespace {

constexpr char kSha256Prefix[] = "sha256:";
constexpr size_t kHexDigits = 64;

}  // namespace

absl::Status ValidateImageDigest(const std::string& field, const std::string& digest) {
  const size_t prefix = sizeof(kSha256Prefix) - 1;
  bool ok = digest.size() == prefix + kHexDigits && absl::StartsWith(digest, kSha256Prefix);
  for (size_t i = prefix; ok && i < digest.size(); ++i) {
    const char c = digest[i];
    ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      field, ": '", digest.substr(0, 80), "' is not \"sha256:\" and 64 lowercase hex digits"));
}

std::string ImageBlobKey(const std::string& digest) {
  return absl::StrCat("images/sha256/", digest.substr(sizeof(kSha256Prefix) - 1), ".tar");
}

void ImageRegistry::Restore(std::vector<rpc::Image> images) {
  for (rpc::Image& image : images) {
    auto key = std::make_pair(image.tenant(), image.name());
    images_[std::move(key)] = std::move(image);
  }
}

absl::Status ImageRegistry::Put(const rpc::Image& image, bool replace) {
  if (absl::Status s = ValidateName("tenant", image.tenant()); !s.ok()) return s;
  if (absl::Status s = ValidateResourceName("image", image.name()); !s.ok()) return s;
  if (absl::Status s = ValidateImageDigest("digest", image.digest()); !s.ok()) return s;
  if (image.size_bytes() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("size_bytes: ", image.size_bytes(), " is negative"));
  }
  auto key = std::make_pair(image.tenant(), image.name());
  if (!replace && images_.count(key) != 0) {
    return absl::AlreadyExistsError(absl::StrCat("tenant ", image.tenant(), " already has an image '",
                                                 image.name(), "' (replace it with --replace)"));
  }
  images_[std::move(key)] = image;
  return absl::OkStatus();
}

absl::StatusOr<rpc::Image> ImageRegistry::Remove(const std::string& tenant, const std::string& name) {
  auto it = images_.find({tenant, name});
  if (it == images_.end()) {
    return absl::NotFoundError(
        absl::StrCat("tenant ", tenant.substr(0, 128), " has no image '", name.substr(0, 128), "'"));
  }
  rpc::Image out = std::move(it->second);
  images_.erase(it);
  return out;
}

const rpc::Image* ImageRegistry::Find(const std::string& tenant, const std::string& name) const {
  auto it = images_.find({tenant, name});
  return it == images_.end() ? nullptr : &it->second;
}

absl::StatusOr<rpc::Image> ImageRegistry::Resolve(const std::string& tenant,
                                                  const std::string& name) const {
  if (const rpc::Image* own = Find(tenant, name)) return *own;
  for (const auto& [key, image] : images_) {  // by tenant: the first publisher wins
    if (key.second == name && image.public_()) return image;
  }
  return absl::InvalidArgumentError(absl::StrCat("image '", name.substr(0, 128),
                                                 "': no such image of tenant ", tenant.substr(0, 128),
                                                 " nor a public one (see `athanor image ls`)"));
}

std::vector<rpc::Image> ImageRegistry::Visible(const std::string& tenant, bool all) const {
  std::vector<rpc::Image> out;
  for (const auto& [key, image] : images_) {
    if (all || key.first == tenant || image.public_()) out.push_back(image);
  }
  return out;
}

std::vector<rpc::Image> ImageRegistry::OfTenant(const std::string& tenant) const {
  std::vector<rpc::Image> out;
  for (auto it = images_.lower_bound({tenant, ""}); it != images_.end() && it->first.first == tenant;
       ++it) {
    out.push_back(it->second);
  }
  return out;
}

bool ImageRegistry::HasDigest(const std::string& digest) const {
  for (const auto& [key, image] : images_) {
    if (image.digest() == digest) return true;
  }
  return false;
}

}  // namespace athanor::coord
