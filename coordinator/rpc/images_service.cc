#include "coordinator/rpc/images_service.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "coordinator/images/image_registry.h"
#include "coordinator/model/validation.h"
#include "coordinator/rpc/node_data_service.h"
#include "coordinator/rpc/rpc_caller.h"
#include "coordinator/wire/grpc_status.h"
#include "storage/archive.h"

namespace athanor::coord {
namespace {

// What the importer says it imported from (shown by `athanor image ls`).
constexpr size_t kMaxSourceBytes = 4096;

absl::Status CheckHeader(const rpc::ImportImageHeader& h, int64_t max_bytes) {
  if (absl::Status s = ValidateResourceName("name", h.name()); !s.ok()) return s;
  if (absl::Status s = ValidateImageDigest("digest", h.digest()); !s.ok()) return s;
  if (h.size_bytes() <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("size_bytes: ", h.size_bytes(), " is not positive"));
  }
  if (h.size_bytes() > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("size_bytes: ", h.size_bytes(),
                                                   " is over this coordinator's --image-max-bytes (",
                                                   max_bytes, ")"));
  }
  if (h.source().size() > kMaxSourceBytes) {
    return absl::InvalidArgumentError(absl::StrCat("source: longer than ", kMaxSourceBytes, " bytes"));
  }
  return absl::OkStatus();
}

std::string Describe(const rpc::Image& i) {
  return absl::StrCat(i.tenant(), "/", i.name(), " (", i.digest(), ", ", i.size_bytes(), " bytes",
                      i.public_() ? ", public" : "", ")");
}

}  // namespace

absl::StatusOr<std::string> ImagesService::TenantFor(const grpc::ServerContext& ctx, const Identity& who,
                                                     absl::string_view method,
                                                     const std::string& requested) const {
  std::string tenant = requested.empty() ? who.tenant : requested;
  if (tenant.empty() && who.insecure) tenant = Caller(&ctx);  // as submissions do
  if (tenant.empty()) {
    return absl::InvalidArgumentError("tenant: required (the caller has no tenant of its own)");
  }
  if (absl::Status s = ValidateName("tenant", tenant); !s.ok()) return s;
  if (absl::Status s = auth_->CheckOwner(who, method, {.tenant = tenant}); !s.ok()) {
    ATHANOR_LOG(WARNING) << method << " refused: " << s.message();
    return s;
  }
  return tenant;
}

absl::Status ImagesService::ReceiveContent(grpc::ServerReader<rpc::ImportImageChunk>* reader,
                                           const rpc::ImportImageHeader& header) {
  const std::string key = ImageBlobKey(header.digest());
  absl::StatusOr<ObjectInfo> existing = data_->Head(key);
  if (!existing.ok() && existing.status().code() != absl::StatusCode::kNotFound) return existing.status();
  // Written only when absent; the object becomes visible at Close, after
  // the digest matched (destroyed unclosed, it is discarded).
  std::unique_ptr<WritableObject> out;
  if (!existing.ok()) {
    absl::StatusOr<std::unique_ptr<WritableObject>> w = data_->OpenWrite(key, PutMode::kOverwrite);
    if (!w.ok()) return w.status();
    out = std::move(*w);
  }
  storage::Sha256Hasher hasher;
  int64_t received = 0;
  rpc::ImportImageChunk chunk;
  while (reader->Read(&chunk)) {
    if (chunk.has_header()) return absl::InvalidArgumentError("a second header after the content began");
    const std::string& data = chunk.data();
    if (static_cast<int64_t>(data.size()) > kDataChunkBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("a piece of ", data.size(), " bytes (at most ", kDataChunkBytes, ")"));
    }
    if (received + static_cast<int64_t>(data.size()) > header.size_bytes()) {
      return absl::InvalidArgumentError(
          absl::StrCat("more content than the header's size_bytes (", header.size_bytes(), ")"));
    }
    received += static_cast<int64_t>(data.size());
    hasher.Update(data.data(), data.size());
    if (out) RETURN_IF_ERROR(out->Append(data));
  }
  if (received != header.size_bytes()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the stream ended after ", received, " of ", header.size_bytes(), " bytes"));
  }
  if (std::string digest = hasher.Finish(); digest != header.digest()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the content's sha256 is ", digest, ", not the header's ", header.digest()));
  }
  return out ? out->Close() : absl::OkStatus();
}

grpc::Status ImagesService::ImportImage(grpc::ServerContext* ctx,
                                        grpc::ServerReader<rpc::ImportImageChunk>* reader, rpc::Image* resp) {
  constexpr absl::string_view kMethod = "Images.ImportImage";
  absl::StatusOr<Identity> who = AuthorizeCall(auth_, *ctx, kMethod);
  if (!who.ok()) return ToGrpc(who.status());
  absl::StatusOr<std::string> tenant = TenantFor(*ctx, *who, kMethod, "");
  if (!tenant.ok()) return ToGrpc(tenant.status());
  rpc::ImportImageChunk first;
  if (!reader->Read(&first)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the stream ended before its header");
  }
  if (!first.has_header() || !first.data().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the first message must hold the header alone");
  }
  const rpc::ImportImageHeader& header = first.header();
  if (absl::Status s = CheckHeader(header, max_bytes_); !s.ok()) return ToGrpc(s);
  if (header.public_() && !SeesEveryTenant(*who)) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        absl::StrCat("only admins publish images (the caller is ", who->Describe(), ")"));
  }
  if (!header.replace() && images_.Find(*tenant, header.name()).ok()) {
    return grpc::Status(grpc::StatusCode::ALREADY_EXISTS,
                        absl::StrCat("tenant ", *tenant, " already has an image '", header.name(),
                                     "' (replace it with --replace)"));
  }
  if (absl::Status s = ReceiveContent(reader, header); !s.ok()) {
    ATHANOR_LOG(WARNING) << Who(auth_, ctx) << ": import of image " << *tenant << "/" << header.name()
                         << " failed: " << s;
    return ToGrpc(s);
  }
  rpc::Image image;
  image.set_name(header.name());
  image.set_tenant(*tenant);
  image.set_digest(header.digest());
  image.set_size_bytes(header.size_bytes());
  image.set_public_(header.public_());
  image.set_created_unix(absl::ToUnixSeconds(absl::Now()));
  image.set_source(header.source());
  absl::MutexLock lock(&blob_mu_);
  // A removal may have deleted the blob since it was found present.
  if (absl::Status s = data_->Head(ImageBlobKey(header.digest())).status(); !s.ok()) {
    return grpc::Status(grpc::StatusCode::ABORTED,
                        absl::StrCat("image content ", header.digest(), " went away while importing (",
                                     s.message(), "): import it again"));
  }
  absl::StatusOr<ClusterImages::Recorded> recorded = images_.Record(image, header.replace());
  if (!recorded.ok()) return ToGrpc(recorded.status());
  ATHANOR_LOG(INFO) << Who(auth_, ctx) << ": imported image " << Describe(recorded->image);
  if (!recorded->released_digest.empty()) DeleteBlobIfUnused(recorded->released_digest);
  *resp = std::move(recorded->image);
  return grpc::Status::OK;
}

grpc::Status ImagesService::ListImages(grpc::ServerContext* ctx, const rpc::ListImagesRequest* req,
                                       rpc::ListImagesResponse* resp) {
  constexpr absl::string_view kMethod = "Images.ListImages";
  absl::StatusOr<Identity> who = AuthorizeCall(auth_, *ctx, kMethod);
  if (!who.ok()) return ToGrpc(who.status());
  std::vector<rpc::Image> images;
  if (!req->tenant().empty()) {
    absl::StatusOr<std::string> tenant = TenantFor(*ctx, *who, kMethod, req->tenant());
    if (!tenant.ok()) return ToGrpc(tenant.status());
    images = images_.OfTenant(*tenant);
  } else if (SeesEveryTenant(*who)) {
    images = images_.Visible("", /*all=*/true);
  } else {
    images = images_.Visible(who->tenant, /*all=*/false);
  }
  for (rpc::Image& i : images) *resp->add_images() = std::move(i);
  return grpc::Status::OK;
}

grpc::Status ImagesService::RemoveImage(grpc::ServerContext* ctx, const rpc::RemoveImageRequest* req,
                                        rpc::Image* resp) {
  constexpr absl::string_view kMethod = "Images.RemoveImage";
  absl::StatusOr<Identity> who = AuthorizeCall(auth_, *ctx, kMethod);
  if (!who.ok()) return ToGrpc(who.status());
  absl::StatusOr<std::string> tenant = TenantFor(*ctx, *who, kMethod, req->tenant());
  if (!tenant.ok()) return ToGrpc(tenant.status());
  if (absl::Status s = ValidateResourceName("name", req->name()); !s.ok()) return ToGrpc(s);
  absl::MutexLock lock(&blob_mu_);
  absl::StatusOr<ClusterImages::Removed> removed = images_.Remove(*tenant, req->name());
  if (!removed.ok()) return ToGrpc(removed.status());
  ATHANOR_LOG(INFO) << Who(auth_, ctx) << ": removed image " << Describe(removed->image);
  if (removed->blob_unused) DeleteBlobIfUnused(removed->image.digest());
  *resp = std::move(removed->image);
  return grpc::Status::OK;
}

void ImagesService::DeleteBlobIfUnused(const std::string& digest) {
  // Under blob_mu_: no import records this digest between the check and the delete.
  if (images_.DigestHeld(digest)) return;
  if (absl::Status s = data_->Delete(ImageBlobKey(digest)); !s.ok()) {
    // The record is gone; the blob stays as garbage until a later import and
    // removal of the same content. Nothing refers to it.
    ATHANOR_LOG(WARNING) << "image content " << digest << " not deleted from " << data_->Describe() << ": " << s;
  }
}

}  // namespace athanor::coord
