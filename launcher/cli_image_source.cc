#include "launcher/cli_image_source.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/subprocess.h"

namespace athanor::cli {
namespace {

namespace fs = std::filesystem;

// The most of a tool's output an error carries.
constexpr size_t kMaxToolOutput = 4096;

// Runs `argv`, its stdout and stderr together captured; Internal with them
// when it fails, NotFound naming the tool and its package when missing.
absl::Status RunTool(const std::vector<std::string>& argv) {
  SubprocessOptions o;
  o.argv = argv;
  o.capture_stdout = true;
  o.stderr_path = "=stdout";
  absl::StatusOr<std::unique_ptr<Subprocess>> p = Subprocess::Start(o);
  if (!p.ok()) {
    if (p.status().code() == absl::StatusCode::kNotFound) {
      return absl::NotFoundError(absl::StrCat(argv[0], " is not installed (apt-get install ", argv[0],
                                              "): it is needed for oci: and docker-archive: sources"));
    }
    return p.status();
  }
  std::string output = (*p)->ReadAllStdout();
  ExitInfo exit = (*p)->Wait();
  if (exit.exit_code == 0 && exit.signal == 0) return absl::OkStatus();
  if (output.size() > kMaxToolOutput) output = "..." + output.substr(output.size() - kMaxToolOutput);
  return absl::InternalError(absl::StrCat(argv[0], " failed (", exit.ToString(), "): ", output));
}

}  // namespace

absl::StatusOr<ImageSource> ParseImageSource(const std::string& text) {
  ImageSource s;
  if (absl::StartsWith(text, "oci:")) {
    s.kind = ImageSource::Kind::kOci;
    s.path = text.substr(4);
    // oci:DIR:REF; a DIR holding ':' needs the REF spelled out.
    if (size_t colon = s.path.rfind(':'); colon != std::string::npos) {
      s.ref = s.path.substr(colon + 1);
      s.path.resize(colon);
    }
  } else if (absl::StartsWith(text, "docker-archive:")) {
    s.kind = ImageSource::Kind::kDockerArchive;
    s.path = text.substr(15);
  } else if (size_t colon = text.find(':'); colon != std::string::npos && text.find('/') > colon) {
    return absl::InvalidArgumentError(absl::StrCat("source '", text.substr(0, 256),
                                                   "': expected oci:DIR[:REF], docker-archive:FILE or a "
                                                   "root-filesystem .tar/.tar.gz"));
  } else {
    s.path = text;
  }
  if (s.path.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("source '", text.substr(0, 256), "': no path"));
  }
  return s;
}

absl::StatusOr<storage::PackResult> BuildImageTar(const ImageSource& source, const std::string& work_dir,
                                                  const std::string& tar_path) {
  std::error_code ec;
  if (!fs::exists(source.path, ec)) {
    return absl::NotFoundError(absl::StrCat("source ", source.path, ": no such file or folder"));
  }
  const std::string rootfs = work_dir + "/rootfs";
  if (source.kind == ImageSource::Kind::kTarball) {
    if (absl::Status s = storage::UnpackTree(source.path, rootfs); !s.ok()) return s;
  } else {
    const std::string layout = work_dir + "/oci";
    std::string from = source.kind == ImageSource::Kind::kOci ? "oci:" + source.path : "docker-archive:" + source.path;
    if (!source.ref.empty()) absl::StrAppend(&from, ":", source.ref);
    if (absl::Status s = RunTool({"skopeo", "copy", "--quiet", from, "oci:" + layout + ":img"}); !s.ok()) return s;
    if (absl::Status s = RunTool({"umoci", "raw", "unpack", "--rootless", "--image", layout + ":img", rootfs});
        !s.ok()) {
      return s;
    }
  }
  return storage::PackTree(rootfs, tar_path);
}

absl::StatusOr<std::string> MakeWorkDir() {
  const char* tmp = getenv("TMPDIR");
  std::string pattern = absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/athanor-image.XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp ", pattern, ": ", strerror(errno)));
  }
  return pattern;
}

void RemoveWorkDir(const std::string& dir) {
  std::error_code ec;
  // A rootless unpack keeps the image's modes: make every folder writable
  // so that its entries can go.
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec)) {
      ::chmod(it->path().c_str(), 0700);
    }
  }
  ::chmod(dir.c_str(), 0700);
  fs::remove_all(dir, ec);
}

}  // namespace athanor::cli
