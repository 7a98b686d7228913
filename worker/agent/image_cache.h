// ImageCache: the agent's unpacked environment images, by digest.
//
// A rank whose RankSpec names an image runs in that image's root filesystem
// (sandbox.h). The cache fetches the image's tar from the coordinator
// (NodeData.FetchImage, through an ImageFetcher), checks its sha256 against
// the digest, and unpacks it (storage::UnpackTree: no device nodes, no
// setuid, nothing outside the tree; owned by root) into
// WORK_DIR/images/<hex>/rootfs. Entries are shared by digest between jobs and
// tenants: the digest names the bytes, so whoever asked first made the same
// tree.
//
// On disk, per image:  images/<hex>/rootfs   the tree (renamed into place whole)
//                      images/<hex>/bytes    its size; written last, so its
//                                            presence marks a complete entry
// Open() rescans the folder: complete entries are kept (least recently used
// by the bytes file's mtime), anything half made (a crash while fetching or
// unpacking) is removed. Eviction (least recently used first) keeps the
// entries' total under `max_bytes`, never removing an image pinned by a rank
// that runs in it, nor the newest entry (so an image bigger than what is
// left still runs, and the cache shrinks back when it is released); an entry is renamed away before it is removed, so a crash
// never leaves half an image under a valid name.
//
// Fetching takes as long as the image is big, so it never happens on the
// caller's thread in Acquire(): Acquire answers at once (ready and pinned,
// being fetched, or failed), and one fetch thread of the cache's own works
// through the queue. `on_ready` (if set) is called by that thread, with no
// lock held, after each fetch ends, so that the agent can converge again at
// once. Ensure() is the blocking form (it fetches on the caller's thread).
//
// Thread-safe (one mutex, never held during fetches, unpacking or removal of
// trees).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace athanor::agent {

// Where image tars come from. Implementations block; Fetch may be called from
// the cache's fetch thread and from Ensure() callers concurrently.
class ImageFetcher {
 public:
  virtual ~ImageFetcher() = default;
  // Writes the tar of the image `digest` ("sha256:<hex>") to the new file
  // `path`, at most `max_bytes` of it (ResourceExhausted past that). The cache
  // checks the digest of what was written.
  virtual absl::Status Fetch(const std::string& digest, const std::string& path, int64_t max_bytes) = 0;
};

struct ImageCacheOptions {
  std::string dir;                        // WORK_DIR/images
  int64_t max_bytes = int64_t{64} << 30;  // --image-cache-bytes
};

struct ImageCacheStats {
  int64_t hits = 0;           // Acquire/Ensure found the image unpacked
  int64_t misses = 0;         // it had to be fetched
  int64_t bytes_fetched = 0;  // tar bytes received
  int64_t bytes_cached = 0;   // unpacked bytes of the entries now on disk
  int64_t images = 0;         // entries now on disk
};

class ImageCache {
 public:
  // Rescans `options.dir` (made if absent). `fetcher` is owned.
  static absl::StatusOr<std::unique_ptr<ImageCache>> Open(ImageCacheOptions options,
                                                          std::unique_ptr<ImageFetcher> fetcher);
  ~ImageCache();  // stops the fetch thread after the fetch in progress
  ImageCache(const ImageCache&) = delete;
  ImageCache& operator=(const ImageCache&) = delete;

  // True for "sha256:" followed by 64 lowercase hex digits.
  static bool ValidDigest(const std::string& digest);

  struct Lookup {
    enum State { kReady, kPending, kFailed } state = kPending;
    std::string rootfs;  // kReady: the tree, pinned until Release(digest)
    std::string error;   // kFailed: why, naming the digest
  };
  // Never blocks on I/O. kReady pins the image (one Release each); kPending
  // queues a fetch when none is queued or running; kFailed reports the last
  // fetch's failure once, so a later Acquire tries again.
  Lookup Acquire(const std::string& digest);
  void Release(const std::string& digest);
  // Blocking: the rootfs of `digest`, fetched and unpacked here when absent.
  // Pins nothing.
  absl::StatusOr<std::string> Ensure(const std::string& digest);

  // Called by the fetch thread after each queued fetch (see the header
  // comment). Waits for a call in progress to return, so that after
  // SetOnReady(nullptr) the old callback never runs again.
  void SetOnReady(std::function<void()> on_ready);
  std::vector<std::string> CachedDigests() const;  // sorted
  ImageCacheStats stats() const;
  // Blocks until the fetch queue is empty (tests).
  void Drain();

 private:
  struct Entry {
    int64_t bytes = 0;
    int64_t last_use = 0;  // LRU clock; bigger is newer
    int pins = 0;
  };
  ImageCache(ImageCacheOptions options, std::unique_ptr<ImageFetcher> fetcher);
  absl::Status Rescan();
  // Fetches, checks and unpacks `digest` (no lock held); adds the entry.
  absl::Status Fetch(const std::string& digest);
  // Picks LRU unpinned entries to remove while over budget; removes them
  // (renamed first) without the lock.
  void Evict();
  void FetchLoop();
  std::string EntryDir(const std::string& digest) const;
  void Touch(const std::string& digest);

  const ImageCacheOptions options_;
  const std::unique_ptr<ImageFetcher> fetcher_;
  mutable absl::Mutex mu_;
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> fetching_ ABSL_GUARDED_BY(mu_);  // queued or in progress
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mu_);
  // Digest -> (why, when): the last fetch failed (kFailureMemory in the .cc).
  std::map<std::string, std::pair<std::string, std::chrono::steady_clock::time_point>> failed_
      ABSL_GUARDED_BY(mu_);
  std::vector<std::string> trash_ ABSL_GUARDED_BY(mu_);  // evicted trees to remove (fetch thread)
  int64_t clock_ ABSL_GUARDED_BY(mu_) = 0;
  ImageCacheStats stats_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void()> on_ready_ ABSL_GUARDED_BY(mu_);
  bool calling_ ABSL_GUARDED_BY(mu_) = false;  // the fetch thread runs a copy of on_ready_
  std::thread thread_;
};

}  // namespace athanor::agent
