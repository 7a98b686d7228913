#include "worker/agent/image_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "storage/archive.h"

namespace athanor::agent {
namespace {

namespace fs = std::filesystem;

constexpr char kPrefix[] = "sha256:";
constexpr size_t kHexLen = 64;
// Entries of an image tar at most: a bound on what a hostile tar costs to unpack.
constexpr int64_t kMaxImageEntries = 1'000'000;
// A failed fetch is reported to every rank that asks within this time; after
// it, the next Acquire tries again (a new attempt of the job, say).
constexpr auto kFailureMemory = std::chrono::seconds(10);

bool IsHex64(const std::string& s) {
  if (s.size() != kHexLen) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string TempName(const std::string& path, const char* what) {
  std::random_device rd;
  return absl::StrCat(path, ".", what, "-", getpid(), "-", rd());
}

// Bytes of the regular files under `dir` (not following symlinks).
int64_t TreeBytes(const std::string& dir) {
  int64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code sec;
    if (it->is_regular_file(sec) && !it->is_symlink(sec)) total += static_cast<int64_t>(it->file_size(sec));
  }
  return total;
}

absl::Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace

bool ImageCache::ValidDigest(const std::string& digest) {
  return absl::StartsWith(digest, kPrefix) && IsHex64(digest.substr(sizeof(kPrefix) - 1));
}

absl::StatusOr<std::unique_ptr<ImageCache>> ImageCache::Open(ImageCacheOptions options,
                                                            std::unique_ptr<ImageFetcher> fetcher) {
  if (options.dir.empty() || options.dir[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat("image cache folder '", options.dir, "' is not absolute"));
  }
  if (options.max_bytes <= 0) return absl::InvalidArgumentError("--image-cache-bytes must be > 0");
  std::error_code ec;
  fs::create_directories(options.dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", options.dir, ": ", ec.message()));
  // Root's alone: ranks never see it (it lies under the masked work dir), and
  // nobody else may plant a tree in it.
  if (chmod(options.dir.c_str(), 0700) != 0) {
    return absl::InternalError(absl::StrCat("chmod ", options.dir, ": ", strerror(errno)));
  }
  std::unique_ptr<ImageCache> cache(new ImageCache(std::move(options), std::move(fetcher)));
  if (absl::Status s = cache->Rescan(); !s.ok()) return s;
  cache->Evict();
  cache->thread_ = std::thread([c = cache.get()] { c->FetchLoop(); });
  return cache;
}

ImageCache::ImageCache(ImageCacheOptions options, std::unique_ptr<ImageFetcher> fetcher)
    : options_(std::move(options)), fetcher_(std::move(fetcher)) {}

ImageCache::~ImageCache() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

std::string ImageCache::EntryDir(const std::string& digest) const {
  return absl::StrCat(options_.dir, "/", digest.substr(sizeof(kPrefix) - 1));
}

absl::Status ImageCache::Rescan() {
  std::vector<std::pair<int64_t, std::string>> found;  // (mtime ns, digest)
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(options_.dir, ec)) {
    std::string name = e.path().filename().string();
    std::string path = e.path().string();
    std::string bytes_text;
    struct stat st;
    bool complete = IsHex64(name) && !e.is_symlink() && e.is_directory() &&
                    fs::is_directory(path + "/rootfs") && lstat((path + "/bytes").c_str(), &st) == 0;
    int64_t bytes = -1;
    if (complete) {
      std::ifstream in(path + "/bytes");
      std::stringstream text;
      text << in.rdbuf();
      complete = absl::SimpleAtoi(absl::StripAsciiWhitespace(text.str()), &bytes) && bytes >= 0;
    }
    if (!complete) {
      ATHANOR_LOG(INFO) << "image cache: removing " << path << " (not a complete image)";
      std::error_code rec;
      fs::remove_all(path, rec);
      continue;
    }
    absl::MutexLock lock(&mu_);
    entries_[absl::StrCat(kPrefix, name)].bytes = bytes;
    found.emplace_back(int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec, absl::StrCat(kPrefix, name));
  }
  if (ec) return absl::InternalError(absl::StrCat("cannot list ", options_.dir, ": ", ec.message()));
  std::sort(found.begin(), found.end());
  absl::MutexLock lock(&mu_);
  for (const auto& [mtime, digest] : found) entries_[digest].last_use = ++clock_;
  return absl::OkStatus();
}

void ImageCache::Touch(const std::string& digest) {
  // The LRU order across restarts (Rescan); best effort.
  utimensat(AT_FDCWD, (EntryDir(digest) + "/bytes").c_str(), nullptr, 0);
}

ImageCache::Lookup ImageCache::Acquire(const std::string& digest) {
  Lookup out;
  if (!ValidDigest(digest)) {
    out.state = Lookup::kFailed;
    out.error = absl::StrCat("image digest '", digest.substr(0, 80), "' is not sha256:<64 hex digits>");
    return out;
  }
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(digest);
    if (it != entries_.end()) {
      ++it->second.pins;
      it->second.last_use = ++clock_;
      ++stats_.hits;
      out.state = Lookup::kReady;
      out.rootfs = EntryDir(digest) + "/rootfs";
    } else if (auto f = failed_.find(digest); f != failed_.end()) {
      if (std::chrono::steady_clock::now() - f->second.second < kFailureMemory) {
        out.state = Lookup::kFailed;
        out.error = f->second.first;
        return out;
      }
      failed_.erase(f);
    }
    if (out.state != Lookup::kReady && fetching_.insert(digest).second) {
      ++stats_.misses;
      queue_.push_back(digest);
    }
  }
  if (out.state == Lookup::kReady) Touch(digest);
  return out;
}

void ImageCache::Release(const std::string& digest) {
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(digest);
    if (it == entries_.end() || it->second.pins <= 0) return;
    --it->second.pins;
  }
  Evict();
}

absl::StatusOr<std::string> ImageCache::Ensure(const std::string& digest) {
  if (!ValidDigest(digest)) {
    return absl::InvalidArgumentError(absl::StrCat("image digest '", digest.substr(0, 80), "' is not sha256:<64 hex digits>"));
  }
  {
    absl::MutexLock lock(&mu_);
    // Another thread fetching the same image: wait for it rather than fetch twice.
    auto idle = [this, &digest]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !fetching_.count(digest); };
    mu_.Await(absl::Condition(&idle));
    auto it = entries_.find(digest);
    if (it != entries_.end()) {
      it->second.last_use = ++clock_;
      ++stats_.hits;
      return EntryDir(digest) + "/rootfs";
    }
    fetching_.insert(digest);
    ++stats_.misses;
  }
  absl::Status s = Fetch(digest);
  {
    absl::MutexLock lock(&mu_);
    fetching_.erase(digest);
  }
  Evict();
  if (!s.ok()) return s;
  return EntryDir(digest) + "/rootfs";
}

absl::Status ImageCache::Fetch(const std::string& digest) {
  std::string final_dir = EntryDir(digest);
  std::string tar = TempName(final_dir, "tar");
  absl::Status s = fetcher_->Fetch(digest, tar, options_.max_bytes);
  std::error_code ec;
  int64_t got = fs::exists(tar, ec) ? static_cast<int64_t>(fs::file_size(tar, ec)) : 0;
  {
    absl::MutexLock lock(&mu_);
    stats_.bytes_fetched += got;
  }
  absl::StatusOr<std::string> actual = s.ok() ? storage::Sha256File(tar) : absl::StatusOr<std::string>(s);
  if (actual.ok() && *actual != digest) {
    actual = absl::DataLossError(absl::StrCat("the fetched tar's digest is ", *actual, ", not the image's"));
  }
  std::string tmp = TempName(final_dir, "tmp");
  if (actual.ok()) {
    if (mkdir(tmp.c_str(), 0755) != 0) {
      actual = absl::InternalError(absl::StrCat("mkdir ", tmp, ": ", strerror(errno)));
    }
  }
  int64_t bytes = 0;
  if (actual.ok()) {
    storage::UnpackOptions unpack;
    unpack.max_bytes = options_.max_bytes;
    unpack.max_entries = kMaxImageEntries;
    absl::Status u = storage::UnpackTree(tar, tmp + "/rootfs", unpack);
    if (u.ok()) {
      bytes = TreeBytes(tmp + "/rootfs");
      u = WriteText(tmp + "/bytes", absl::StrCat(bytes, "\n"));
    }
    if (u.ok() && rename(tmp.c_str(), final_dir.c_str()) != 0) {
      u = absl::InternalError(absl::StrCat("rename to ", final_dir, ": ", strerror(errno)));
    }
    if (!u.ok()) actual = u;
  }
  fs::remove(tar, ec);
  if (!actual.ok()) {
    fs::remove_all(tmp, ec);
    std::string msg = absl::StrCat("image ", digest, ": ", actual.status().message());
    ATHANOR_LOG(WARNING) << "image cache: " << msg;
    return absl::Status(actual.status().code(), msg);
  }
  absl::MutexLock lock(&mu_);
  Entry& e = entries_[digest];
  e.bytes = bytes;
  e.last_use = ++clock_;
  ATHANOR_LOG(INFO) << "image cache: " << digest << " fetched (" << got << " bytes) and unpacked (" << bytes
                    << " bytes)";
  return absl::OkStatus();
}

void ImageCache::Evict() {
  absl::MutexLock lock(&mu_);
  int64_t total = 0;
  for (const auto& [d, e] : entries_) total += e.bytes;
  // The newest entry stays even over budget: it was just fetched or used,
  // and evicting it before its rank pins it would only fetch it again.
  int64_t newest = 0;
  for (const auto& [d, e] : entries_) newest = std::max(newest, e.last_use);
  while (total > options_.max_bytes) {
    auto victim = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->second.pins == 0 && it->second.last_use != newest &&
          (victim == entries_.end() || it->second.last_use < victim->second.last_use)) {
        victim = it;
      }
    }
    if (victim == entries_.end()) break;  // the rest is in use; evicted when released
    // Renamed under the lock, so that a new fetch of the same digest never
    // meets the old tree; removed later by the fetch thread.
    std::string dir = EntryDir(victim->first);
    std::string gone = TempName(dir, "evicted");
    if (rename(dir.c_str(), gone.c_str()) != 0) {
      ATHANOR_LOG(WARNING) << "image cache: cannot evict " << dir << ": " << strerror(errno);
      break;
    }
    ATHANOR_LOG(INFO) << "image cache: evicted " << victim->first << " (" << victim->second.bytes << " bytes)";
    total -= victim->second.bytes;
    trash_.push_back(gone);
    entries_.erase(victim);
  }
}

void ImageCache::FetchLoop() {
  for (;;) {
    std::string digest;
    std::vector<std::string> trash;
    {
      absl::MutexLock lock(&mu_);
      auto work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty() || !trash_.empty(); };
      mu_.Await(absl::Condition(&work));
      if (stop_) return;
      trash.swap(trash_);
      if (!queue_.empty()) {
        digest = queue_.front();
        queue_.pop_front();
      }
      busy_ = true;
    }
    for (const std::string& t : trash) {
      std::error_code ec;
      fs::remove_all(t, ec);
    }
    absl::Status s = digest.empty() ? absl::OkStatus() : Fetch(digest);
    std::function<void()> on_ready;
    {
      absl::MutexLock lock(&mu_);
      if (!digest.empty()) {
        fetching_.erase(digest);
        if (!s.ok()) failed_[digest] = {std::string(s.message()), std::chrono::steady_clock::now()};
        on_ready = on_ready_;
        calling_ = static_cast<bool>(on_ready);
      }
    }
    Evict();
    if (on_ready) on_ready();
    absl::MutexLock lock(&mu_);
    calling_ = false;
    busy_ = false;
  }
}

void ImageCache::Drain() {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stop_ || (queue_.empty() && trash_.empty() && !busy_);
  };
  mu_.Await(absl::Condition(&idle));
}

void ImageCache::SetOnReady(std::function<void()> on_ready) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !calling_; };
  mu_.Await(absl::Condition(&idle));
  on_ready_ = std::move(on_ready);
}

std::vector<std::string> ImageCache::CachedDigests() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const auto& [d, e] : entries_) out.push_back(d);
  return out;
}

ImageCacheStats ImageCache::stats() const {
  absl::MutexLock lock(&mu_);
  ImageCacheStats s = stats_;
  s.images = static_cast<int64_t>(entries_.size());
  s.bytes_cached = 0;
  for (const auto& [d, e] : entries_) s.bytes_cached += e.bytes;
  return s;
}

}  // namespace athanor::agent
