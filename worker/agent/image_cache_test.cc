#include "worker/agent/image_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/archive.h"

namespace athanor::agent {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Serves tars from files by digest, counting fetches.
class FakeFetcher : public ImageFetcher {
 public:
  explicit FakeFetcher(std::map<std::string, std::string>* tars) : tars_(tars) {}
  absl::Status Fetch(const std::string& digest, const std::string& path, int64_t max_bytes) override {
    ++calls;
    auto it = tars_->find(digest);
    if (it == tars_->end()) return absl::NotFoundError("no image " + digest + " at the coordinator");
    fs::copy_file(it->second, path);
    return absl::OkStatus();
  }
  std::atomic<int> calls{0};

 private:
  std::map<std::string, std::string>* tars_;
};

class ImageCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/athanor-image-cache-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    cache_dir_ = dir_ + "/images";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // An image whose rootfs holds etc/os-release ("ID=<id>\n") and a file of
  // `filler` bytes; returns its digest and records its tar's size.
  std::string MakeImage(const std::string& id, size_t filler) {
    std::string root = dir_ + "/src-" + id;
    fs::create_directories(root + "/etc");
    std::ofstream(root + "/etc/os-release") << "ID=" << id << "\n";
    std::ofstream(root + "/filler") << std::string(filler, 'x');
    std::string tar = dir_ + "/" + id + ".tar";
    absl::StatusOr<storage::PackResult> packed = storage::PackTree(root, tar);
    EXPECT_TRUE(packed.ok()) << packed.status();
    tars_[packed->digest] = tar;
    tar_bytes_[packed->digest] = packed->bytes;
    return packed->digest;
  }

  std::unique_ptr<ImageCache> Open(int64_t max_bytes) {
    auto fetcher = std::make_unique<FakeFetcher>(&tars_);
    fetcher_ = fetcher.get();
    absl::StatusOr<std::unique_ptr<ImageCache>> cache =
        ImageCache::Open({.dir = cache_dir_, .max_bytes = max_bytes}, std::move(fetcher));
    EXPECT_TRUE(cache.ok()) << cache.status();
    return cache.ok() ? std::move(*cache) : nullptr;
  }

  std::string Hex(const std::string& digest) { return digest.substr(7); }

  std::vector<std::string> Listing() {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(cache_dir_)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }

  std::string dir_, cache_dir_;
  std::map<std::string, std::string> tars_;
  std::map<std::string, int64_t> tar_bytes_;
  FakeFetcher* fetcher_ = nullptr;
};

TEST_F(ImageCacheTest, MissFetchesThenHitsWithoutFetching) {
  std::string a = MakeImage("alpha", 1000);
  std::unique_ptr<ImageCache> cache = Open(1 << 20);
  int ready_calls = 0;
  cache->SetOnReady([&] { ++ready_calls; });

  ImageCache::Lookup first = cache->Acquire(a);
  EXPECT_EQ(first.state, ImageCache::Lookup::kPending);
  EXPECT_EQ(cache->Acquire(a).state, ImageCache::Lookup::kPending);  // one fetch queued, not two
  cache->Drain();
  EXPECT_EQ(fetcher_->calls.load(), 1);
  EXPECT_EQ(ready_calls, 1);

  ImageCache::Lookup ready = cache->Acquire(a);
  ASSERT_EQ(ready.state, ImageCache::Lookup::kReady) << ready.error;
  EXPECT_EQ(ready.rootfs, cache_dir_ + "/" + Hex(a) + "/rootfs");
  EXPECT_EQ(ReadFile(ready.rootfs + "/etc/os-release"), "ID=alpha\n");
  EXPECT_EQ(ReadFile(cache_dir_ + "/" + Hex(a) + "/bytes"), "1009\n");  // "ID=alpha\n" + 1000

  ImageCacheStats s = cache->stats();
  EXPECT_EQ(s.misses, 1);
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.bytes_fetched, tar_bytes_[a]);
  EXPECT_EQ(s.bytes_cached, 1009);
  EXPECT_EQ(s.images, 1);
  EXPECT_THAT(cache->CachedDigests(), ElementsAre(a));
  EXPECT_THAT(Listing(), ElementsAre(Hex(a)));  // no tar or temporary left

  absl::StatusOr<std::string> again = cache->Ensure(a);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, ready.rootfs);
  EXPECT_EQ(fetcher_->calls.load(), 1);
  EXPECT_EQ(cache->stats().hits, 2);
  cache->Release(a);
}

TEST_F(ImageCacheTest, EvictsLeastRecentlyUsedUnderByteBudget) {
  std::string a = MakeImage("a", 995), b = MakeImage("b", 995), c = MakeImage("c", 995);  // 5 + 995 bytes each
  std::unique_ptr<ImageCache> cache = Open(2500);
  ASSERT_TRUE(cache->Ensure(a).ok());
  ASSERT_TRUE(cache->Ensure(b).ok());
  ASSERT_TRUE(cache->Ensure(a).ok());  // a is now newer than b
  ASSERT_TRUE(cache->Ensure(c).ok());  // 3000 > 2500: b goes
  cache->Drain();
  std::vector<std::string> want = {a, c};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(cache->CachedDigests(), want);
  std::vector<std::string> want_dirs = {Hex(a), Hex(c)};
  std::sort(want_dirs.begin(), want_dirs.end());
  EXPECT_EQ(Listing(), want_dirs);
  EXPECT_EQ(cache->stats().bytes_cached, 2000);
  EXPECT_EQ(cache->stats().misses, 3);
  EXPECT_EQ(fetcher_->calls.load(), 3);
}

TEST_F(ImageCacheTest, PinnedImageIsNotEvictedUntilReleased) {
  std::string a = MakeImage("a", 995), b = MakeImage("b", 995);
  std::unique_ptr<ImageCache> cache = Open(1500);
  EXPECT_EQ(cache->Acquire(a).state, ImageCache::Lookup::kPending);
  cache->Drain();
  ASSERT_EQ(cache->Acquire(a).state, ImageCache::Lookup::kReady);  // pinned by a "rank"
  ASSERT_TRUE(cache->Ensure(b).ok());  // 2000 > 1500, but a is pinned and b the newest
  cache->Drain();
  std::vector<std::string> both = {a, b};
  std::sort(both.begin(), both.end());
  EXPECT_EQ(cache->CachedDigests(), both);
  EXPECT_EQ(cache->stats().bytes_cached, 2000);
  cache->Release(a);  // a's rank ended: now a is evictable
  cache->Drain();
  EXPECT_THAT(cache->CachedDigests(), ElementsAre(b));
  EXPECT_THAT(Listing(), ElementsAre(Hex(b)));
  EXPECT_EQ(cache->stats().bytes_cached, 1000);
}

TEST_F(ImageCacheTest, RestartKeepsCompleteEntriesAndRemovesHalfMadeOnes) {
  std::string a = MakeImage("a", 95), b = MakeImage("b", 195);
  {
    std::unique_ptr<ImageCache> cache = Open(1 << 20);
    ASSERT_TRUE(cache->Ensure(a).ok());
    ASSERT_TRUE(cache->Ensure(b).ok());
  }
  // What a crash leaves: an entry without its bytes file, a temporary, a tar.
  std::string half = std::string(64, 'c');
  fs::create_directories(cache_dir_ + "/" + half + "/rootfs/etc");
  fs::create_directories(cache_dir_ + "/" + Hex(a) + ".tmp-1-2/rootfs");
  std::ofstream(cache_dir_ + "/" + Hex(b) + ".tar-1-2") << "partial";
  std::unique_ptr<ImageCache> cache = Open(1 << 20);
  std::vector<std::string> both = {a, b};
  std::sort(both.begin(), both.end());
  EXPECT_EQ(cache->CachedDigests(), both);
  std::vector<std::string> dirs = {Hex(a), Hex(b)};
  std::sort(dirs.begin(), dirs.end());
  EXPECT_EQ(Listing(), dirs);
  EXPECT_EQ(cache->stats().bytes_cached, 100 + 200);
  EXPECT_EQ(cache->Acquire(b).state, ImageCache::Lookup::kReady);
  EXPECT_EQ(fetcher_->calls.load(), 0);  // the new cache never fetched
  EXPECT_EQ(cache->stats().misses, 0);
  EXPECT_EQ(cache->stats().hits, 1);
}

TEST_F(ImageCacheTest, DigestMismatchIsRefused) {
  std::string a = MakeImage("a", 10);
  std::string b = MakeImage("b", 10);
  tars_[a] = tars_[b];  // the "coordinator" sends b's bytes for a
  std::unique_ptr<ImageCache> cache = Open(1 << 20);
  EXPECT_EQ(cache->Acquire(a).state, ImageCache::Lookup::kPending);
  cache->Drain();
  ImageCache::Lookup failed = cache->Acquire(a);
  EXPECT_EQ(failed.state, ImageCache::Lookup::kFailed);
  EXPECT_EQ(failed.error, "image " + a + ": the fetched tar's digest is " + b + ", not the image's");
  // Every rank that asks soon after hears the same.
  EXPECT_EQ(cache->Acquire(a).error, failed.error);
  EXPECT_THAT(cache->CachedDigests(), IsEmpty());
  EXPECT_THAT(Listing(), IsEmpty());
  absl::StatusOr<std::string> ensured = cache->Ensure(a);
  EXPECT_EQ(ensured.status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(ImageCacheTest, FetchErrorsAndBadDigestsNameTheImage) {
  std::unique_ptr<ImageCache> cache = Open(1 << 20);
  std::string missing = "sha256:" + std::string(64, 'd');
  EXPECT_EQ(cache->Acquire(missing).state, ImageCache::Lookup::kPending);
  cache->Drain();
  ImageCache::Lookup failed = cache->Acquire(missing);
  EXPECT_EQ(failed.state, ImageCache::Lookup::kFailed);
  EXPECT_EQ(failed.error, "image " + missing + ": no image " + missing + " at the coordinator");

  ImageCache::Lookup bad = cache->Acquire("sha256:../../etc");
  EXPECT_EQ(bad.state, ImageCache::Lookup::kFailed);
  EXPECT_EQ(bad.error, "image digest 'sha256:../../etc' is not sha256:<64 hex digits>");
  EXPECT_EQ(cache->Ensure("sha256:ABC").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fetcher_->calls.load(), 1);
}

}  // namespace
}  // namespace athanor::agent
