#include "worker/agent/sandbox_image.h"

#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status.h"
#include "worker/agent/command_access.h"

namespace athanor::agent {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxElfString = 4096;
constexpr uint64_t kMaxPhnum = 256;
constexpr uint64_t kMaxDynamic = 4096;

bool Under(const std::string& path, const std::string& dir) {
  return path == dir || (absl::StartsWith(path, dir) && (dir.back() == '/' || path[dir.size()] == '/'));
}

bool ReadAt(int fd, uint64_t size, uint64_t offset, void* out, uint64_t len) {
  if (offset > size || len > size - offset) return false;
  return pread(fd, out, len, static_cast<off_t>(offset)) == static_cast<ssize_t>(len);
}

// A NUL-terminated string at `offset`, at most `limit` bytes long.
bool ReadString(int fd, uint64_t size, uint64_t offset, uint64_t limit, std::string* out) {
  if (offset >= size) return false;
  uint64_t len = std::min<uint64_t>({limit, size - offset, kMaxElfString});
  std::string buf(len, '\0');
  if (pread(fd, buf.data(), len, static_cast<off_t>(offset)) != static_cast<ssize_t>(len)) return false;
  size_t end = buf.find('\0');
  if (end == std::string::npos) return false;
  *out = buf.substr(0, end);
  return true;
}

std::string Canonical(const std::string& path) {
  std::error_code ec;
  std::string real = fs::canonical(path, ec).string();
  return ec ? "" : real;
}

// The kind of the mount that decides what the rank sees at `path`: the one
// with the longest DST containing it; "" when none does.
std::string CoveringKind(const std::vector<std::string>& mounts, const std::string& path) {
  std::string best, kind;
  for (const std::string& m : mounts) {
    size_t first = m.find(':');
    size_t last = m.rfind(':');
    if (first == std::string::npos || first == last) continue;
    std::string dst = m.substr(last + 1);
    if (!Under(path, dst) || dst.size() < best.size()) continue;
    best = dst;
    kind = m.substr(0, first);
  }
  return kind;
}

}  // namespace

absl::StatusOr<ElfInfo> ReadElf(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return ErrnoStatus("open " + path);
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  struct stat st;
  if (fstat(fd, &st) != 0) return ErrnoStatus("stat " + path);
  if (!S_ISREG(st.st_mode)) return absl::InvalidArgumentError(path + " is not a regular file");
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  Elf64_Ehdr eh;
  if (!ReadAt(fd, size, 0, &eh, sizeof(eh)) || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64) {
    return absl::InvalidArgumentError(path + " is not a 64-bit ELF file");
  }
  if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > kMaxPhnum) {
    return absl::InvalidArgumentError(path + ": malformed program headers");
  }
  std::vector<Elf64_Phdr> ph(eh.e_phnum);
  if (!ReadAt(fd, size, eh.e_phoff, ph.data(), uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr))) {
    return absl::InvalidArgumentError(path + ": program headers outside the file");
  }
  ElfInfo info;
  const Elf64_Phdr* dynamic = nullptr;
  for (const Elf64_Phdr& p : ph) {
    if (p.p_type == PT_INTERP && !ReadString(fd, size, p.p_offset, p.p_filesz, &info.interpreter)) {
      return absl::InvalidArgumentError(path + ": malformed PT_INTERP");
    }
    if (p.p_type == PT_DYNAMIC) dynamic = &p;
  }
  if (info.interpreter.empty() || dynamic == nullptr) return info;
  uint64_t count = std::min<uint64_t>(dynamic->p_filesz / sizeof(Elf64_Dyn), kMaxDynamic);
  std::vector<Elf64_Dyn> dyn(count);
  if (!ReadAt(fd, size, dynamic->p_offset, dyn.data(), count * sizeof(Elf64_Dyn))) return info;
  uint64_t strtab = 0, strsz = 0, runpath = UINT64_MAX;
  for (const Elf64_Dyn& d : dyn) {
    if (d.d_tag == DT_NULL) break;
    if (d.d_tag == DT_STRTAB) strtab = d.d_un.d_ptr;
    if (d.d_tag == DT_STRSZ) strsz = d.d_un.d_val;
    if (d.d_tag == DT_RUNPATH || (d.d_tag == DT_RPATH && runpath == UINT64_MAX)) runpath = d.d_un.d_val;
  }
  if (runpath == UINT64_MAX || runpath >= strsz) return info;
  // DT_STRTAB is an address: find the file offset of the segment holding it.
  for (const Elf64_Phdr& p : ph) {
    if (p.p_type != PT_LOAD || strtab < p.p_vaddr || strtab - p.p_vaddr >= p.p_filesz) continue;
    uint64_t offset = p.p_offset + (strtab - p.p_vaddr);
    std::string text;
    if (offset < p.p_offset || !ReadString(fd, size, offset + runpath, strsz - runpath, &text)) break;
    for (absl::string_view dir : absl::StrSplit(text, ':', absl::SkipEmpty())) {
      if (!dir.empty() && dir[0] == '/' && dir.find('$') == absl::string_view::npos) info.runpath.emplace_back(dir);
    }
    break;
  }
  return info;
}

bool InImage(const std::string& rootfs, const std::string& path) {
  int root = open(rootfs.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) return false;
  open_how how{};
  how.flags = O_PATH | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  int fd = static_cast<int>(syscall(SYS_openat2, root, path.c_str(), &how, sizeof(how)));
  close(root);
  if (fd < 0) return false;
  close(fd);
  return true;
}

std::vector<std::string> HostDriverLibraries(const std::vector<std::string>& dirs) {
  std::vector<std::string> out;
  for (const std::string& dir : dirs) {
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) continue;
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      bool driver = absl::StartsWith(name, "libcuda.so") ||
                    (absl::StartsWith(name, "libnvidia-") && absl::StrContains(name, ".so"));
      std::string path = dir + "/" + name;
      struct stat st;
      if (driver && stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) out.push_back(path);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<std::string> HostLibraryDirs() {
  std::vector<std::string> candidates;
  std::error_code ec;
  std::vector<std::string> confs;
  for (const fs::directory_entry& e : fs::directory_iterator("/etc/ld.so.conf.d", ec)) {
    if (e.path().extension() == ".conf") confs.push_back(e.path().string());
  }
  std::sort(confs.begin(), confs.end());  // ldconfig's order
  for (const std::string& conf : confs) {
    std::ifstream in(conf);
    std::string line;
    while (std::getline(in, line)) {
      absl::string_view l = absl::StripAsciiWhitespace(line);
      if (!l.empty() && l[0] == '/') candidates.emplace_back(l);
    }
  }
  candidates.push_back("/lib");
  candidates.push_back("/usr/lib");
  std::vector<std::string> out;
  for (const std::string& c : candidates) {
    std::string real = Canonical(c);
    if (real.empty() || real.find(':') != std::string::npos || !fs::is_directory(real)) continue;
    if (std::find(out.begin(), out.end(), real) == out.end()) out.push_back(real);
  }
  return out;
}

absl::StatusOr<ImageRun> PlanImageRun(const std::string& rootfs, const std::vector<std::string>& mounts,
                                      const std::vector<std::string>& argv, uid_t uid,
                                      const std::vector<std::string>& never_shown,
                                      const std::vector<std::string>& driver_dirs) {
  ImageRun run;
  run.argv = argv;
  std::vector<std::string> drivers = HostDriverLibraries(driver_dirs);
  for (const std::string& lib : drivers) {
    std::string real = Canonical(lib);
    if (real.empty() || real.find(':') != std::string::npos) continue;
    run.mounts.push_back(absl::StrCat("rofile:", real, ":", kDriverLibDir, "/", fs::path(lib).filename().string()));
  }
  if (!run.mounts.empty()) run.library_path_append = kDriverLibDir;
  if (argv.empty() || argv[0].empty() || argv[0][0] != '/') return run;  // on the image's PATH

  std::string command = fs::path(argv[0]).lexically_normal().string();
  std::string kind = CoveringKind(mounts, command);
  bool host_visible = kind == "bind" || kind == "robind" || kind == "rofile";
  if (!host_visible && InImage(rootfs, command)) return run;  // the image's own program
  std::string real = Canonical(command);
  if (real.empty()) return run;  // nowhere: exec says so in the rank's log
  absl::StatusOr<ElfInfo> elf = ReadElf(real);
  if (!elf.ok() || elf->interpreter.empty()) return run;  // a static program or a script: natively
  std::string inside = command;
  if (!host_visible) {
    for (const std::string& dir : never_shown) {
      if (Under(real, dir) || Under(command, dir)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "the command ", command, " is not in the job's image and lies under ", dir,
            ", which never shows to ranks; install it where ranks see it"));
      }
    }
    ASSIGN_OR_RETURN(bool allowed, CanExecuteAs(uid, uid, real));
    if (!allowed) {
      return absl::FailedPreconditionError(absl::StrCat("the command ", command,
                                                        " is not in the job's image, and the tenant's uid ", uid,
                                                        " cannot read and execute it on the host"));
    }
    if (real.find(':') != std::string::npos) {
      return absl::FailedPreconditionError(absl::StrCat("the command ", command, ": its path ", real, " holds a ':'"));
    }
    inside = absl::StrCat(kHostPrefix, command);
    run.mounts.push_back(absl::StrCat("rofile:", real, ":", inside));
  }
  std::string loader = Canonical(elf->interpreter);
  if (loader.empty() || loader.find(':') != std::string::npos) {
    return absl::FailedPreconditionError(absl::StrCat("the command ", command, " needs the loader ",
                                                      elf->interpreter, ", which this host lacks"));
  }
  std::vector<std::string> lib_dirs;
  for (const std::string& d : elf->runpath) {
    std::string r = Canonical(d);
    if (!r.empty() && r.find(':') == std::string::npos && fs::is_directory(r)) lib_dirs.push_back(r);
  }
  for (const std::string& d : HostLibraryDirs()) lib_dirs.push_back(d);
  std::vector<std::string> unique_dirs;
  for (const std::string& d : lib_dirs) {
    if (std::find(unique_dirs.begin(), unique_dirs.end(), d) == unique_dirs.end()) unique_dirs.push_back(d);
  }
  // Bind each folder once: the shortest ones, which hold the others.
  std::vector<std::string> trees = unique_dirs;
  trees.push_back(fs::path(loader).parent_path().string());
  std::sort(trees.begin(), trees.end());
  std::vector<std::string> bound;
  for (const std::string& t : trees) {
    bool inside_bound = false;
    for (const std::string& b : bound) inside_bound = inside_bound || Under(t, b);
    if (inside_bound) continue;
    bound.push_back(t);
    run.mounts.push_back(absl::StrCat("robind:", t, ":", kHostPrefix, t));
    // What never shows to ranks stays masked there too (the work dir, --sandbox-hide).
    for (const std::string& hidden : never_shown) {
      if (Under(hidden, t)) run.mounts.push_back(absl::StrCat("ro::", kHostPrefix, hidden));
    }
  }
  std::vector<std::string> search;
  for (const std::string& d : unique_dirs) search.push_back(absl::StrCat(kHostPrefix, d));
  if (!drivers.empty()) search.push_back(kDriverLibDir);
  run.argv = {absl::StrCat(kHostPrefix, loader), "--argv0", argv[0], "--library-path", absl::StrJoin(search, ":"),
              inside};
  run.argv.insert(run.argv.end(), argv.begin() + 1, argv.end());
  return run;
}

}  // namespace athanor::agent
