// Fuzzes storage::UnpackTree, which the agent runs as root on image tars a
// tenant made: whatever the bytes, it returns (no crash, no hang past the
// limits), an error leaves no target folder behind, and a tree it accepts
// holds only folders, regular files without setuid/setgid and symlinks, and
// packs and unpacks again.
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "storage/archive.h"

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = [] {
    std::string d = (fs::temp_directory_path() / ("fuzz_untar." + std::to_string(getpid()))).string();
    fs::create_directories(d);
    return d;
  }();
  const std::string tar = dir + "/in.tar", out = dir + "/out", again = dir + "/again", repacked = dir + "/re.tar";
  std::error_code ec;
  fs::remove_all(out, ec);
  fs::remove_all(again, ec);
  std::ofstream(tar, std::ios::binary).write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  athanor::storage::UnpackOptions limits;
  limits.max_bytes = 1 << 20;
  limits.max_entries = 1000;
  absl::Status s = athanor::storage::UnpackTree(tar, out, limits);
  if (!s.ok()) {
    if (fs::exists(out)) __builtin_trap();
    return 0;
  }
  for (fs::recursive_directory_iterator it(out, ec), end; !ec && it != end; it.increment(ec)) {
    struct stat st;
    if (lstat(it->path().c_str(), &st) != 0) __builtin_trap();
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) __builtin_trap();
    if ((st.st_mode & (S_ISUID | S_ISGID)) != 0) __builtin_trap();
  }
  if (!athanor::storage::PackTree(out, repacked).ok()) __builtin_trap();
  if (!athanor::storage::UnpackTree(repacked, again, limits).ok()) __builtin_trap();
  return 0;
}
