// Directory trees as tar files, for environment images and volumes.
//
// PackTree writes a deterministic pax tar: the same tree (same paths, bytes,
// modes, mtimes and link targets) always gives the same bytes and so the same
// digest, whoever packs it and wherever the tree lies. UnpackTree is the
// reverse for tars that came from outside (a tenant's image, a volume
// snapshot): it trusts nothing in them and refuses what could reach outside
// the target folder or create privileged files.
//
// Thread model: free functions without shared state; callers may run them on
// any thread, concurrently on different paths. All of them block on file I/O.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace athanor::storage {

struct PackResult {
  std::string digest;  // "sha256:<64 lowercase hex>" of the tar file's bytes
  int64_t bytes = 0;   // size of the tar file
};

// Packs the tree under `dir` (not the folder itself) into a new file
// `tar_path` (replaced if present). Entries come in byte-wise sorted path
// order, paths relative ("etc/os-release"); only regular files, folders and
// symlinks (hard links become separate files); owner and group numeric 0 with
// no names; mode kept without setuid, setgid and sticky; mtime kept to the
// second; no atime, ctime, xattrs or ACLs.
// Errors: NotFound (no `dir`), InvalidArgument (a fifo, socket or device node
// in the tree, naming it), Internal/Unavailable for I/O errors with errno text.
absl::StatusOr<PackResult> PackTree(const std::string& dir, const std::string& tar_path);

struct UnpackOptions {
  // Owner of everything unpacked; -1 leaves it to the caller's uid (root when
  // the agent unpacks). Owners recorded in the tar are never used.
  int64_t owner_uid = -1;
  // Sum of regular files' sizes, and number of entries: past either the
  // unpack stops with ResourceExhausted. 0 means no limit.
  int64_t max_bytes = 0;
  int64_t max_entries = 0;
  // Group of everything unpacked when owner_uid is set; -1: same as owner_uid.
  int64_t owner_gid = -1;
};

// Unpacks the tar (plain or gzip-compressed) at `tar_path` into the folder
// `dir`, which must not exist yet (its parent must). The tree is unpacked into
// a temporary sibling and renamed into place at the end, so `dir` is either
// absent or complete; on error the sibling is removed.
// Refused (InvalidArgument naming the entry; nothing is left behind): absolute
// paths, ".." components, hard links whose target is refused by the same
// rules, device nodes, fifos and sockets, any entry that would be written
// through a symlink. Neutralised: setuid and setgid bits are cleared (sticky
// stays: it only narrows who may delete);
// owners are replaced as above. Limits: ResourceExhausted.
// Other errors: AlreadyExists (`dir` exists), NotFound (no tar), DataLoss (a
// truncated or corrupt tar).
absl::Status UnpackTree(const std::string& tar_path, const std::string& dir,
                        const UnpackOptions& options = {});

// "sha256:<hex>" of the file's bytes. Errors: NotFound, Internal (I/O).
absl::StatusOr<std::string> Sha256File(const std::string& path);

// Incremental "sha256:<hex>", for data that arrives in pieces (an image
// fetched in chunks). Not thread-safe.
class Sha256Hasher {
 public:
  Sha256Hasher();
  ~Sha256Hasher();
  Sha256Hasher(const Sha256Hasher&) = delete;
  Sha256Hasher& operator=(const Sha256Hasher&) = delete;

  void Update(const void* data, size_t size);
  // The digest of everything passed to Update; call once.
  std::string Finish();

 private:
  struct State;
  State* state_;  // owned
};

}  // namespace athanor::storage
