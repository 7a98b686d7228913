// A rank in an environment image (worker/agent/sandbox_image.h): the image is
// a busybox-static root filesystem made here, packed (storage::PackTree),
// fetched into an ImageCache and unpacked as the agent does, and a rank runs
// in it through Sandbox::Wrap and athanor-sandbox-exec. Needs root (the
// sandbox does) and busybox-static (scripts/install-test-tools); as another
// user the tests skip saying so, without busybox they fail.
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/subprocess.h"
#include "storage/archive.h"
#include "worker/agent/image_cache.h"
#include "worker/agent/rank_supervisor.h"
#include "worker/agent/sandbox.h"
#include "worker/agent/sandbox_image.h"

namespace athanor::agent {
namespace {

namespace fs = std::filesystem;

constexpr char kOsRelease[] = "ID=athanor-busybox\nNAME=\"athanor test image\"\n";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class TarFetcher : public ImageFetcher {
 public:
  explicit TarFetcher(std::string tar) : tar_(std::move(tar)) {}
  absl::Status Fetch(const std::string&, const std::string& path, int64_t) override {
    fs::copy_file(tar_, path);
    return absl::OkStatus();
  }

 private:
  std::string tar_;
};

class ImageSandboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "the sandbox needs root; CI runs this suite as root";
    ASSERT_TRUE(fs::exists("/bin/busybox")) << "install busybox-static (scripts/install-test-tools)";
    char tmpl[] = "/tmp/athanor-image-sandbox-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);

    // The image: busybox, a few of its applets, its own os-release, and a
    // symlink that points at the host's /etc were it followed outside.
    std::string src = dir_ + "/image-src";
    fs::create_directories(src + "/bin");
    fs::create_directories(src + "/etc");
    fs::copy_file("/bin/busybox", src + "/bin/busybox");
    for (const char* applet : {"sh", "cat", "touch", "id", "ls", "readlink"}) {
      fs::create_symlink("busybox", src + "/bin/" + applet);
    }
    std::ofstream(src + "/etc/os-release") << kOsRelease;
    fs::create_symlink("/etc", src + "/tmp");
    absl::StatusOr<storage::PackResult> packed = storage::PackTree(src, dir_ + "/image.tar");
    ASSERT_TRUE(packed.ok()) << packed.status();
    digest_ = packed->digest;

    absl::StatusOr<std::unique_ptr<ImageCache>> cache = ImageCache::Open(
        {.dir = dir_ + "/work/images", .max_bytes = int64_t{1} << 30}, std::make_unique<TarFetcher>(dir_ + "/image.tar"));
    ASSERT_TRUE(cache.ok()) << cache.status();
    cache_ = std::move(*cache);
    absl::StatusOr<std::string> rootfs = cache_->Ensure(digest_);
    ASSERT_TRUE(rootfs.ok()) << rootfs.status();
    rootfs_ = *rootfs;

    // Stand-in GPU nodes (NVIDIA's major 195), as tests/sandbox makes them.
    std::string dev = dir_ + "/dev";
    fs::create_directories(dev);
    for (int i = 0; i < 2; ++i) {
      ASSERT_EQ(mknod(absl::StrCat(dev, "/nvidia", i).c_str(), S_IFCHR | 0666, makedev(195, i)), 0);
    }
    ASSERT_EQ(mknod((dev + "/nvidiactl").c_str(), S_IFCHR | 0666, makedev(195, 255)), 0);

    SandboxOptions o;
    o.exec_path = std::string(getenv("ATHANOR_BIN_DIR")) + "/athanor-sandbox-exec";
    o.work_dir = dir_ + "/work";
    o.node_name = "image-node";
    o.gpu_device_dir = dev;
    o.registry_dir = dir_ + "/registry";
    o.node_gpus = 2;
    o.node_memory_mb = 512;
    o.node_cpus = 1;
    absl::StatusOr<std::unique_ptr<Sandbox>> sandbox = Sandbox::Create(o);
    ASSERT_TRUE(sandbox.ok()) << sandbox.status();
    sandbox_ = std::move(*sandbox);
  }

  void TearDown() override {
    sandbox_.reset();
    cache_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // Runs `argv` as rank 0 of job `job` in the image with GPU 0; its output.
  std::string RunRank(const std::string& job, const std::vector<std::string>& argv) {
    RankTarget target;
    target.key = {job, 1, 0};
    target.gpu_ids = {0};
    target.tenant = "images";
    target.image_digest = digest_;
    JobShare share;
    share.tenant = "images";
    share.node_gpu_ids = {0};
    SubprocessOptions options;
    options.argv = argv;
    options.stdout_path = dir_ + "/" + job + ".out";
    options.stderr_path = "=stdout";
    options.new_process_group = true;
    absl::Status wrapped = sandbox_->Wrap(target, share, "", &options, rootfs_);
    EXPECT_TRUE(wrapped.ok()) << wrapped;
    if (!wrapped.ok()) return "";
    absl::StatusOr<std::unique_ptr<Subprocess>> p = Subprocess::Start(options);
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) return "";
    // Watchdog: a rank that hangs fails the test instead of hanging it.
    std::optional<ExitInfo> e = (*p)->WaitFor(std::chrono::seconds(30));
    if (!e) {
      (*p)->Signal(SIGKILL).IgnoreError();
      e = (*p)->Wait();
      ADD_FAILURE() << "the rank ran past 30 s";
    }
    sandbox_->Ended(target.key, e->signal);
    EXPECT_EQ(e->exit_code, 0) << ReadFile(options.stdout_path);
    return ReadFile(options.stdout_path);
  }

  std::string dir_, digest_, rootfs_;
  std::unique_ptr<ImageCache> cache_;
  std::unique_ptr<Sandbox> sandbox_;
};

TEST_F(ImageSandboxTest, RankSeesTheImageItsGpusAndCannotWriteTheRoot) {
  ASSERT_NE(ReadFile("/etc/os-release"), kOsRelease);
  const std::string script =
      "cat /etc/os-release; "
      "for d in nvidia0 nvidia1 nvidiactl; do [ -c /dev/$d ] && echo $d=yes || echo $d=no; done; "
      "touch /new 2>/dev/null && echo root-write=yes || echo root-write=no; "
      "touch /bin/new 2>/dev/null && echo bin-write=yes || echo bin-write=no; "
      "touch /etc/new 2>/dev/null && echo etc-write=yes || echo etc-write=no; "
      "touch /tmp/new && echo tmp-write=yes; "
      "touch \"$HOME/new\" && echo work-write=yes; "
      "[ -e /usr ] && echo host-usr=yes || echo host-usr=no; "
      "[ -e /etc/debian_version ] && echo host-etc=yes || echo host-etc=no; "
      "echo uid=$(id -u)";
  std::string out = RunRank("img1", {"/bin/sh", "-c", script});
  EXPECT_EQ(out, absl::StrCat(kOsRelease,
                              "nvidia0=yes\nnvidia1=no\nnvidiactl=yes\n"
                              "root-write=no\nbin-write=no\netc-write=no\ntmp-write=yes\nwork-write=yes\n"
                              "host-usr=no\nhost-etc=no\n"
                              "uid=", sandbox_->TenantUid("images"), "\n"));
  // The image's /tmp symlink to /etc never led a mount or a write to the host's.
  EXPECT_FALSE(fs::exists("/etc/new"));
  EXPECT_FALSE(fs::exists(rootfs_ + "/bin/new"));
}

TEST_F(ImageSandboxTest, HostDynamicProgramRunsThroughTheHostLoader) {
  // /usr/bin/cat is the host's dynamic coreutils cat, absent from the image:
  // it runs through the host's loader and reads the image's os-release.
  absl::StatusOr<ElfInfo> elf = ReadElf("/usr/bin/cat");
  ASSERT_TRUE(elf.ok()) << elf.status();
  ASSERT_FALSE(elf->interpreter.empty()) << "/usr/bin/cat is expected to be a dynamic program";
  ASSERT_FALSE(InImage(rootfs_, "/usr/bin/cat"));
  EXPECT_TRUE(InImage(rootfs_, "/bin/cat"));  // busybox's, through its symlink
  std::string out = RunRank("img2", {"/usr/bin/cat", "/etc/os-release"});
  EXPECT_EQ(out, kOsRelease);
  // The image's own cat runs natively.
  EXPECT_EQ(RunRank("img3", {"/bin/cat", "/etc/os-release"}), kOsRelease);
}

// The RankSupervisor with an ImageCache: a rank whose image is being fetched
// is not started (and not reported) until it is there; a fetch that fails
// fails the rank to start, naming the digest and why.
TEST_F(ImageSandboxTest, SupervisorStartsRanksOnceTheirImageIsThereAndFailsThemWhenItCannotBe) {
  std::string other = dir_ + "/other-src";
  fs::create_directories(other);
  std::ofstream(other + "/x") << "x";
  ASSERT_TRUE(storage::PackTree(other, dir_ + "/other.tar").ok());
  // A fresh cache (its own folder) whose "coordinator" sends the image's
  // bytes for the image, and another tar's for a second digest.
  const std::string bad = "sha256:" + std::string(64, 'b');
  class Fetcher : public ImageFetcher {
   public:
    Fetcher(std::string good_digest, std::string good, std::string other) : good_digest_(good_digest), good_(good), other_(other) {}
    absl::Status Fetch(const std::string& digest, const std::string& path, int64_t) override {
      fs::copy_file(digest == good_digest_ ? good_ : other_, path);
      return absl::OkStatus();
    }
    std::string good_digest_, good_, other_;
  };
  absl::StatusOr<std::unique_ptr<ImageCache>> cache = ImageCache::Open(
      {.dir = dir_ + "/work/images2", .max_bytes = int64_t{1} << 30},
      std::make_unique<Fetcher>(digest_, dir_ + "/image.tar", dir_ + "/other.tar"));
  ASSERT_TRUE(cache.ok()) << cache.status();
  FakeClock clock;
  RankSupervisor supervisor(dir_ + "/work", &clock, sandbox_.get());
  supervisor.SetImageCache(cache->get());

  RankTarget good;
  good.key = {"imgjob", 1, 0};
  good.command = {"/bin/cat", "/etc/os-release"};
  good.tenant = "images";
  good.image_digest = digest_;
  RankTarget broken = good;
  broken.key = {"badjob", 1, 0};
  broken.image_digest = bad;
  supervisor.Converge({good, broken});
  EXPECT_TRUE(supervisor.Reports().empty());  // both wait for their images
  (*cache)->Drain();
  supervisor.Converge({good, broken});
  std::map<std::string, RankStatusReport> by_job;
  for (const RankStatusReport& r : supervisor.Reports()) by_job[r.key.job_id] = r;
  ASSERT_EQ(by_job.size(), 2u);
  EXPECT_EQ(by_job["badjob"].phase, RankPhase::kFailedToStart);
  absl::StatusOr<std::string> other_digest = storage::Sha256File(dir_ + "/other.tar");
  EXPECT_EQ(by_job["badjob"].message, "cannot get the job's image: image " + bad + ": the fetched tar's digest is " +
                                          *other_digest + ", not the image's");
  ASSERT_EQ(by_job["imgjob"].phase, RankPhase::kRunning) << by_job["imgjob"].message;
  // Wait (on the child, no sleeps) for the rank's exit.
  for (;;) {
    supervisor.Reap();
    bool done = false;
    for (const RankStatusReport& r : supervisor.Reports()) {
      done = done || (r.key.job_id == "imgjob" && r.phase == RankPhase::kExited);
    }
    if (done) break;
    supervisor.WaitForChildExit();
  }
  EXPECT_EQ(ReadFile(*RankSupervisor::LogPath(dir_ + "/work", good.key)), kOsRelease);
  EXPECT_EQ((*cache)->stats().misses, 2);
  EXPECT_EQ((*cache)->stats().hits, 1);
  supervisor.Converge({});
}

}  // namespace
}  // namespace athanor::agent
