// How a rank runs in an environment image (sandbox.h, image_cache.h).
//
// athanor-sandbox-exec builds the rank's root from the image's rootfs
// (--image) instead of the host's "/"; the agent decides here, at Wrap time,
// what else that root needs:
//   - the host's GPU driver libraries (libcuda.so*, libnvidia-*.so* in the
//     host's library folders), each bound read-only into
//     /usr/local/nvidia/lib64, which is appended to LD_LIBRARY_PATH (as the
//     NVIDIA container toolkit does); none found, nothing added;
//   - the athanor runtime: a command given by absolute path that the image
//     does not hold, or that a host folder mounted into the sandbox shows
//     (a --sandbox-shared-dir build of athanor-train, say), and that is a
//     dynamic ELF program on the host, runs through the host's dynamic loader
//     with the host's library folders, all read-only under /.athanor/host
//     (the agent's work dir and --sandbox-hide paths inside them masked):
//     `/.athanor/host/LOADER --library-path DIRS COMMAND ARGS...`, so that it
//     runs in an image without a C library (a busybox-static rootfs). A host
//     program outside every mounted folder is shown read-only at
//     /.athanor/host/PATH first, under the same rules as command_access.h
//     (the tenant's uid may run it on the host; never under the agent's work
//     dir or a --sandbox-hide path). Commands the image holds run natively.
//
// Thread model: stateless functions; PlanImageRun forks (CanExecuteAs), safe
// from a multi-threaded agent.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace athanor::agent {

inline constexpr char kHostPrefix[] = "/.athanor/host";
inline constexpr char kDriverLibDir[] = "/usr/local/nvidia/lib64";

struct ElfInfo {
  std::string interpreter;            // PT_INTERP; empty: static (or not ELF)
  std::vector<std::string> runpath;   // DT_RUNPATH or DT_RPATH entries, without $ORIGIN ones
};
// The dynamic loader and run path of the ELF program at `path`; NotFound or
// InvalidArgument (not an ELF file, or a malformed one) otherwise. Every
// offset and size read from the file is checked against the file's size.
absl::StatusOr<ElfInfo> ReadElf(const std::string& path);

// Whether `path` (absolute) names something inside the tree `rootfs`,
// following the image's own symlinks inside the tree only.
bool InImage(const std::string& rootfs, const std::string& path);

// Driver libraries (libcuda.so*, libnvidia-*.so*) in `dirs`: the paths of
// regular files and of symlinks to them, sorted.
std::vector<std::string> HostDriverLibraries(const std::vector<std::string>& dirs);

// The host's library folders: /etc/ld.so.conf.d entries, then /lib and
// /usr/lib (each resolved, existing, without duplicates).
std::vector<std::string> HostLibraryDirs();

struct ImageRun {
  std::vector<std::string> mounts;  // "KIND:SRC:DST", added to Wrap's
  std::vector<std::string> argv;    // the rank's command, rewritten
  std::string library_path_append;  // for LD_LIBRARY_PATH; empty: unchanged
};

// What running `argv` as `uid` in an image needs, given Wrap's `mounts` so far.
// `driver_dirs` are searched for driver libraries (HostLibraryDirs() in the
// agent). FailedPrecondition naming the command when it cannot be shown.
absl::StatusOr<ImageRun> PlanImageRun(const std::string& rootfs, const std::vector<std::string>& mounts,
                                      const std::vector<std::string>& argv, uid_t uid,
                                      const std::vector<std::string>& never_shown,
                                      const std::vector<std::string>& driver_dirs);

}  // namespace athanor::agent
