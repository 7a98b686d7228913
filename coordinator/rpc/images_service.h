// The Images gRPC service: tenants import, list and remove environment
// images (docs/operations.md, "Images"). Records live in the core
// (core/core_images.h); each image's tar lives once in the data store
// (--data-store) at images/sha256/<hex>.tar, whoever imported it.
//
// Who may do what (auth_policy.cc): a user imports into, lists and removes
// its own tenant's images and sees the public ones; only an admin marks an
// image public or names another tenant. With --insecure the tenant is the
// x-athanor-user metadata, as for submissions.
//
// ImportImage reads the header first and refuses, before reading any
// content, a bad name or digest, a size over --image-max-bytes, `public`
// from a user, or an existing name without `replace`. It then hashes every
// byte it receives (a tenant names a digest only by sending its content: no
// one gains another's image by knowing its digest), writes the content to
// the store only when the blob is absent, and records the image in one
// commit once the size and digest match the header.
//
// A blob is deleted once no record and no live job holds its digest. Blob
// checks and deletions are serialised by blob_mu_ (short sections: never
// held while content moves), and an import whose blob vanished meanwhile is
// answered Aborted (retry).
//
// Thread-safe (gRPC calls it from many threads). The core, the authorizer
// and the data store are not owned and outlive the service.
#pragma once

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "checkpoint/object_store.h"
#include "coordinator/auth/auth_policy.h"
#include "coordinator/core/core_images.h"
#include "proto/athanor_data.grpc.pb.h"

namespace athanor::coord {

// --image-max-bytes' default: 32 GiB.
inline constexpr int64_t kDefaultImageMaxBytes = int64_t{32} << 30;

class ImagesService final : public rpc::Images::Service {
 public:
  ImagesService(CoordinatorCore* core, const Authorizer* auth, ObjectStore* data, int64_t max_bytes)
      : images_(core), auth_(auth), data_(data), max_bytes_(max_bytes) {}

  grpc::Status ImportImage(grpc::ServerContext* ctx, grpc::ServerReader<rpc::ImportImageChunk>* reader,
                           rpc::Image* resp) override;
  grpc::Status ListImages(grpc::ServerContext* ctx, const rpc::ListImagesRequest* req,
                          rpc::ListImagesResponse* resp) override;
  grpc::Status RemoveImage(grpc::ServerContext* ctx, const rpc::RemoveImageRequest* req,
                           rpc::Image* resp) override;

 private:
  // The tenant a call acts on: `requested` (admins; a user naming its own),
  // else the caller's own; checked against `method`'s owner rule.
  absl::StatusOr<std::string> TenantFor(const grpc::ServerContext& ctx, const Identity& who,
                                        absl::string_view method, const std::string& requested) const;
  // Reads the content after the header into the store (when absent) and
  // checks it against `header`; InvalidArgument naming what differs.
  absl::Status ReceiveContent(grpc::ServerReader<rpc::ImportImageChunk>* reader,
                              const rpc::ImportImageHeader& header);
  // Deletes `digest`'s blob when nothing holds it any more.
  void DeleteBlobIfUnused(const std::string& digest);

  CoreImages images_;
  const Authorizer* const auth_;
  ObjectStore* const data_;
  const int64_t max_bytes_;
  absl::Mutex blob_mu_;  // see the class comment; guards no field, only the store's blobs
};

}  // namespace athanor::coord
