// What `athanor image import` imports: a SOURCE made into the canonical
// root-filesystem tar (storage::PackTree) whose digest names the image.
//
//   oci:DIR[:REF]        an OCI image layout (skopeo copy, then umoci raw unpack)
//   docker-archive:FILE  a `docker save` tar (the same way)
//   FILE                 a root filesystem as a .tar or .tar.gz (storage::UnpackTree)
//
// Whatever the source, the tree is unpacked into a temporary folder and
// packed again, so that the same tree always gives the same digest.
// skopeo and umoci are looked up on PATH; their failure is an error that
// carries their own output.
//
// Blocking, with files only under the given work folder. Thread-compatible.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "storage/archive.h"

namespace athanor::cli {

struct ImageSource {
  enum class Kind { kOci, kDockerArchive, kTarball };
  Kind kind = Kind::kTarball;
  std::string path;  // the layout's folder, the archive, the tarball
  std::string ref;   // oci: the tag in the layout ("" : its only image)
};

// InvalidArgument naming what is wrong (an empty path, an unknown
// "scheme:" prefix such as "docker://", which is not supported).
absl::StatusOr<ImageSource> ParseImageSource(const std::string& text);

// The canonical tar of `source` at `tar_path`, built inside `work_dir` (an
// empty folder the caller removes). NotFound for a missing source or tool
// (naming it and the package), Internal carrying a tool's output when it
// fails, and UnpackTree's errors for a tarball.
absl::StatusOr<storage::PackResult> BuildImageTar(const ImageSource& source, const std::string& work_dir,
                                                  const std::string& tar_path);

// A fresh folder under $TMPDIR (else /tmp), and its removal (folders a
// rootless unpack left unwritable included).
absl::StatusOr<std::string> MakeWorkDir();
void RemoveWorkDir(const std::string& dir);

}  // namespace athanor::cli
