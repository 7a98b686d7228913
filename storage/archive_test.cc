#include "storage/archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <utime.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace athanor::storage {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class ArchiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/athanor-archive-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Path(const std::string& rel) const { return dir_ + "/" + rel; }

  void WriteFile(const std::string& path, const std::string& data, mode_t mode, time_t mtime) {
    std::ofstream(path, std::ios::binary) << data;
    ASSERT_EQ(chmod(path.c_str(), mode), 0);
    SetMtime(path, mtime);
  }
  static void SetMtime(const std::string& path, time_t mtime) {
    struct timespec times[2] = {{mtime, 0}, {mtime, 0}};
    ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW), 0) << path;
  }
  static std::string ReadFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  static mode_t Mode(const std::string& path) {
    struct stat st;
    EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
    return st.st_mode;
  }

  // A small tree, its entries made in the order given by `reverse`.
  void MakeTree(const std::string& root, bool reverse) {
    ASSERT_EQ(mkdir(root.c_str(), 0755), 0);
    auto dirs = [&] {
      ASSERT_EQ(mkdir((root + "/bin").c_str(), 0750), 0);
      ASSERT_EQ(mkdir((root + "/etc").c_str(), 0755), 0);
    };
    auto files = [&] {
      WriteFile(root + "/etc/os-release", "ID=athanor-test\n", 0644, 1700000000);
      WriteFile(root + "/bin/tool", "#!/bin/sh\necho hi\n", 04755, 1700000100);
      ASSERT_EQ(symlink("../etc/os-release", (root + "/bin/release").c_str()), 0);
    };
    if (reverse) {
      ASSERT_EQ(mkdir((root + "/etc").c_str(), 0755), 0);
      WriteFile(root + "/etc/os-release", "ID=athanor-test\n", 0644, 1700000000);
      ASSERT_EQ(mkdir((root + "/bin").c_str(), 0750), 0);
      ASSERT_EQ(symlink("../etc/os-release", (root + "/bin/release").c_str()), 0);
      WriteFile(root + "/bin/tool", "#!/bin/sh\necho hi\n", 04755, 1700000100);
    } else {
      dirs();
      files();
    }
    SetMtime(root + "/bin/release", 1700000200);
    SetMtime(root + "/bin", 1700000300);
    SetMtime(root + "/etc", 1700000400);
  }

  std::string dir_;
};

struct TarEntry {
  std::string name;
  mode_t type = AE_IFREG;
  mode_t perm = 0644;
  std::string data;
  std::string symlink;
  std::string hardlink;
};

// Writes a tar by hand, so that tests can hand UnpackTree what PackTree never makes.
void WriteTar(const std::string& path, const std::vector<TarEntry>& entries) {
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  ASSERT_EQ(archive_write_open_filename(a, path.c_str()), ARCHIVE_OK);
  for (const TarEntry& t : entries) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, t.name.c_str());
    archive_entry_set_mode(e, t.type | t.perm);
    archive_entry_set_size(e, static_cast<la_int64_t>(t.data.size()));
    if (!t.symlink.empty()) archive_entry_set_symlink(e, t.symlink.c_str());
    if (!t.hardlink.empty()) archive_entry_set_hardlink(e, t.hardlink.c_str());
    if (t.type == AE_IFCHR) archive_entry_set_rdev(e, makedev(1, 3));
    ASSERT_EQ(archive_write_header(a, e), ARCHIVE_OK) << t.name;
    if (!t.data.empty()) {
      ASSERT_EQ(archive_write_data(a, t.data.data(), t.data.size()), static_cast<la_ssize_t>(t.data.size()));
    }
    archive_entry_free(e);
  }
  ASSERT_EQ(archive_write_close(a), ARCHIVE_OK);
  archive_write_free(a);
}

TEST_F(ArchiveTest, Sha256FileOfKnownBytes) {
  WriteFile(Path("abc"), "abc", 0644, 1700000000);
  absl::StatusOr<std::string> digest = Sha256File(Path("abc"));
  ASSERT_TRUE(digest.ok()) << digest.status();
  EXPECT_EQ(*digest, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256File(Path("missing")).status().code(), absl::StatusCode::kNotFound);

  Sha256Hasher hasher;
  hasher.Update("a", 1);
  hasher.Update("bc", 2);
  EXPECT_EQ(hasher.Finish(), *digest);
}

TEST_F(ArchiveTest, RoundTripKeepsContentModesSymlinksAndMtimes) {
  MakeTree(Path("src"), false);
  absl::StatusOr<PackResult> packed = PackTree(Path("src"), Path("tree.tar"));
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_EQ(packed->bytes, static_cast<int64_t>(fs::file_size(Path("tree.tar"))));
  EXPECT_EQ(packed->digest, *Sha256File(Path("tree.tar")));
  EXPECT_EQ(packed->bytes % 512, 0);

  ASSERT_TRUE(UnpackTree(Path("tree.tar"), Path("out")).ok());
  EXPECT_EQ(ReadFile(Path("out/etc/os-release")), "ID=athanor-test\n");
  EXPECT_EQ(ReadFile(Path("out/bin/tool")), "#!/bin/sh\necho hi\n");
  EXPECT_EQ(Mode(Path("out/etc/os-release")), S_IFREG | 0644);
  EXPECT_EQ(Mode(Path("out/bin/tool")), S_IFREG | 0755);  // setuid not packed
  EXPECT_EQ(Mode(Path("out/bin")), S_IFDIR | 0750);
  EXPECT_EQ(Mode(Path("out/bin/release")) & S_IFMT, S_IFLNK);
  EXPECT_EQ(fs::read_symlink(Path("out/bin/release")).string(), "../etc/os-release");
  EXPECT_EQ(ReadFile(Path("out/bin/release")), "ID=athanor-test\n");
  struct stat st;
  ASSERT_EQ(stat(Path("out/bin/tool").c_str(), &st), 0);
  EXPECT_EQ(st.st_mtime, 1700000100);
  ASSERT_EQ(stat(Path("out/bin").c_str(), &st), 0);
  EXPECT_EQ(st.st_mtime, 1700000300);
  // Nothing but the tree: no temporary sibling is left beside it.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"out", "src", "tree.tar"}));

  // Unpacking again over the same folder is refused, not merged.
  EXPECT_EQ(UnpackTree(Path("tree.tar"), Path("out")).code(), absl::StatusCode::kAlreadyExists);
}

TEST_F(ArchiveTest, SameTreeGivesSameDigest) {
  MakeTree(Path("a"), false);
  MakeTree(Path("b"), true);  // same content, made in another order elsewhere
  absl::StatusOr<PackResult> first = PackTree(Path("a"), Path("1.tar"));
  absl::StatusOr<PackResult> again = PackTree(Path("a"), Path("2.tar"));
  absl::StatusOr<PackResult> other = PackTree(Path("b"), Path("3.tar"));
  ASSERT_TRUE(first.ok() && again.ok() && other.ok());
  EXPECT_EQ(first->digest, again->digest);
  EXPECT_EQ(first->digest, other->digest);
  EXPECT_EQ(first->bytes, other->bytes);
  EXPECT_EQ(first->digest.size(), 7u + 64u);

  // One changed mtime changes the digest.
  SetMtime(Path("b/etc/os-release"), 1700000001);
  absl::StatusOr<PackResult> changed = PackTree(Path("b"), Path("4.tar"));
  ASSERT_TRUE(changed.ok());
  EXPECT_NE(changed->digest, first->digest);
}

TEST_F(ArchiveTest, PackRefusesFifo) {
  ASSERT_EQ(mkdir(Path("src").c_str(), 0755), 0);
  ASSERT_EQ(mkfifo(Path("src/pipe").c_str(), 0644), 0);
  absl::StatusOr<PackResult> packed = PackTree(Path("src"), Path("t.tar"));
  EXPECT_EQ(packed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(packed.status().message(), HasSubstr("src/pipe"));
  EXPECT_FALSE(fs::exists(Path("t.tar")));
}

struct HostileCase {
  const char* what;
  std::vector<TarEntry> entries;
  const char* message;
};

TEST_F(ArchiveTest, HostileTarsAreRefusedAndLeaveNothing) {
  const std::vector<HostileCase> cases = {
      {"dotdot", {{.name = "../x", .data = "x"}}, "tar entry '../x' contains '..'"},
      {"dotdot-inside", {{.name = "a/../../x", .data = "x"}}, "tar entry 'a/../../x' contains '..'"},
      {"absolute", {{.name = "/etc/x", .data = "x"}}, "tar entry '/etc/x' is absolute"},
      {"device", {{.name = "dev/null", .type = AE_IFCHR}}, "tar entry dev/null is not a regular file"},
      {"fifo", {{.name = "pipe", .type = AE_IFIFO}}, "tar entry pipe is not a regular file"},
      {"hardlink-out", {{.name = "pw", .hardlink = "../../etc/passwd"}},
       "tar hard link target '../../etc/passwd' contains '..'"},
      {"hardlink-abs", {{.name = "pw", .hardlink = "/etc/passwd"}},
       "tar hard link target '/etc/passwd' is absolute"},
      {"through-symlink",
       {{.name = "escape", .type = AE_IFLNK, .perm = 0777, .symlink = "/tmp"},
        {.name = "escape/athanor-archive-test-escaped", .data = "x"}},
       "tar entry escape/athanor-archive-test-escaped: "},
  };
  for (const HostileCase& c : cases) {
    SCOPED_TRACE(c.what);
    std::string tar = Path(std::string(c.what) + ".tar");
    WriteTar(tar, c.entries);
    std::string out = Path(std::string(c.what) + "-out");
    absl::Status s = UnpackTree(tar, out);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr(c.message));
    EXPECT_FALSE(fs::exists(out));
  }
  EXPECT_FALSE(fs::exists("/tmp/athanor-archive-test-escaped"));
  // Only the tars remain: no half-unpacked sibling.
  int others = 0;
  for (const auto& e : fs::directory_iterator(dir_)) others += e.path().extension() != ".tar";
  EXPECT_EQ(others, 0);
}

TEST_F(ArchiveTest, SetuidAndSetgidAreStripped) {
  WriteTar(Path("s.tar"), {{.name = "bin", .type = AE_IFDIR, .perm = 02755},
                           {.name = "bin/su", .perm = 04755, .data = "x"},
                           {.name = "bin/sg", .perm = 02711, .data = "y"},
                           {.name = "tmp", .type = AE_IFDIR, .perm = 01777},
                           {.name = "bin/su2", .hardlink = "bin/su"}});
  ASSERT_TRUE(UnpackTree(Path("s.tar"), Path("out")).ok());
  EXPECT_EQ(Mode(Path("out/bin")), S_IFDIR | 0755);
  EXPECT_EQ(Mode(Path("out/bin/su")), S_IFREG | 0755);
  EXPECT_EQ(Mode(Path("out/bin/sg")), S_IFREG | 0711);
  EXPECT_EQ(Mode(Path("out/tmp")), S_IFDIR | 01777);
  EXPECT_EQ(fs::hard_link_count(Path("out/bin/su")), 2u);
  EXPECT_EQ(ReadFile(Path("out/bin/su2")), "x");
}

TEST_F(ArchiveTest, OwnerIsReplaced) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give files to another uid";
  WriteTar(Path("o.tar"), {{.name = "d", .type = AE_IFDIR, .perm = 0755}, {.name = "d/f", .data = "z"}});
  UnpackOptions options;
  options.owner_uid = 54321;
  ASSERT_TRUE(UnpackTree(Path("o.tar"), Path("out"), options).ok());
  for (const char* rel : {"out", "out/d", "out/d/f"}) {
    struct stat st;
    ASSERT_EQ(lstat(Path(rel).c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 54321u) << rel;
    EXPECT_EQ(st.st_gid, 54321u) << rel;
  }
}

TEST_F(ArchiveTest, LimitsOnBytesAndEntries) {
  WriteTar(Path("l.tar"), {{.name = "d", .type = AE_IFDIR, .perm = 0755},
                           {.name = "d/a", .data = "12345"},
                           {.name = "d/b", .data = "67890"}});
  UnpackOptions exact{.max_bytes = 10, .max_entries = 3};
  ASSERT_TRUE(UnpackTree(Path("l.tar"), Path("exact"), exact).ok());
  EXPECT_EQ(ReadFile(Path("exact/d/b")), "67890");

  absl::Status bytes = UnpackTree(Path("l.tar"), Path("bytes"), UnpackOptions{.max_bytes = 9});
  EXPECT_EQ(bytes.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(bytes.message(), HasSubstr("holds more than 9 bytes"));
  EXPECT_FALSE(fs::exists(Path("bytes")));

  absl::Status entries = UnpackTree(Path("l.tar"), Path("entries"), UnpackOptions{.max_entries = 2});
  EXPECT_EQ(entries.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(entries.message(), HasSubstr("has more than 2 entries"));
  EXPECT_FALSE(fs::exists(Path("entries")));
}

TEST_F(ArchiveTest, TruncatedTarIsDataLoss) {
  MakeTree(Path("src"), false);
  ASSERT_TRUE(PackTree(Path("src"), Path("t.tar")).ok());
  fs::resize_file(Path("t.tar"), 700);
  absl::Status s = UnpackTree(Path("t.tar"), Path("out"));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_FALSE(fs::exists(Path("out")));
  EXPECT_EQ(UnpackTree(Path("none.tar"), Path("out")).code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace athanor::storage
