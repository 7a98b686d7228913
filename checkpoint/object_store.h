// ObjectStore: the storage interface checkpoints are written through.
//
// A store is rooted at a URI (file:///var/ckpt, s3://bucket/prefix); keys are
// relative '/'-separated names below that root ("job/step-0000000001/COMMIT").
// Backends register a factory per URI scheme; OpenObjectStore(uri) picks one.
//
// Threading: every method of a store is thread-safe. A WritableObject is owned
// by one thread at a time and must outlive none of its store.
//
// Durability: an object becomes visible to Get/Head/List only when its
// WritableObject::Close() returns OK, and is durable then (fsync / S3 200).
// A WritableObject destroyed without Close() aborts (nothing becomes visible).
//
// Errors: NotFound for a missing key, AlreadyExists from a create-only put on
// an existing key, OutOfRange for a range past the end, Unavailable /
// DeadlineExceeded for transient backend failures that survived retries,
// InvalidArgument for bad keys or URIs. Messages name the key and the backend
// detail (errno, HTTP status, S3 error code).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace athanor {

struct ObjectInfo {
  std::string key;
  uint64_t size = 0;
  int64_t mtime_unix = 0;  // seconds; 0 when the backend does not say
};

// An upload that was started and never finished (an S3 multipart upload, a
// file backend temporary). Swept by checkpoint retention.
struct PendingUpload {
  std::string key;
  std::string upload_id;  // backend-specific handle
};

enum class PutMode {
  kOverwrite,   // replace whatever is there
  kCreateOnly,  // AlreadyExists if the key exists (see Capabilities)
};

struct StoreCapabilities {
  // kCreateOnly is atomic against concurrent writers. When false the backend
  // emulates it with head-then-put, which is racy.
  bool atomic_create_only = false;
};

// A streaming upload. Append() may block while earlier data is flushed.
class WritableObject {
 public:
  virtual ~WritableObject() = default;
  virtual absl::Status Append(absl::string_view data) = 0;
  // Makes the object visible and durable. After an error the object is
  // aborted; calling anything else afterwards is a programmer error.
  virtual absl::Status Close() = 0;
  // Discards what was written. Idempotent; best effort.
  virtual void Abort() = 0;
};

class ObjectStore {
 public:
  virtual ~ObjectStore() = default;

  // The URI this store was opened with (for messages).
  virtual std::string Describe() const = 0;
  virtual StoreCapabilities Capabilities() const = 0;

  // Starts a streaming put of `key`.
  virtual absl::StatusOr<std::unique_ptr<WritableObject>> OpenWrite(const std::string& key,
                                                                    PutMode mode) = 0;
  // Whole-object put; the default streams through OpenWrite.
  virtual absl::Status Put(const std::string& key, absl::string_view data,
                           PutMode mode = PutMode::kOverwrite);

  // Reads `length` bytes from `offset` (length < 0: to the end). OutOfRange
  // when offset+length exceeds the object; NotFound when it is missing.
  virtual absl::StatusOr<std::string> Get(const std::string& key, uint64_t offset = 0,
                                          int64_t length = -1) = 0;
  // Like Get(key, offset, length) with length >= 0, but into caller memory
  // (`dst` holds `length` bytes), avoiding a copy where the backend can. The
  // default goes through Get. On error dst's contents are unspecified.
  virtual absl::Status GetInto(const std::string& key, uint64_t offset, uint64_t length, char* dst);
  virtual absl::StatusOr<ObjectInfo> Head(const std::string& key) = 0;
  // Every visible object whose key starts with `prefix`, sorted by key.
  virtual absl::StatusOr<std::vector<ObjectInfo>> List(const std::string& prefix) = 0;
  // Deletes `key`; OK when it does not exist.
  virtual absl::Status Delete(const std::string& key) = 0;

  // Unfinished uploads under `prefix`; backends without any return none.
  virtual absl::StatusOr<std::vector<PendingUpload>> ListPendingUploads(const std::string& prefix);
  virtual absl::Status AbortPendingUpload(const PendingUpload& upload);
};

// Builds a store for a parsed URI string of its scheme.
using ObjectStoreFactory =
    std::function<absl::StatusOr<std::unique_ptr<ObjectStore>>(const std::string& uri)>;

// Registers `factory` for `scheme` ("file", "s3"); a later registration for
// the same scheme replaces the earlier one. Thread-safe.
void RegisterObjectStoreScheme(const std::string& scheme, ObjectStoreFactory factory);

// Opens the store for `uri` by its scheme (a bare path is file://).
// InvalidArgument for a malformed URI, Unimplemented for an unregistered scheme
// (link the backend and call its Register function, or RegisterBuiltinObjectStores()).
absl::StatusOr<std::unique_ptr<ObjectStore>> OpenObjectStore(const std::string& uri);

// Rejects empty keys, leading '/', "." and ".." segments and NUL bytes.
absl::Status ValidateObjectKey(const std::string& key);

}  // namespace athanor
