#include "coordinator/model/validation.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/elastic_batch.h"
#include "common/status.h"

namespace athanor::coord {
namespace {

absl::Status Invalid(const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

absl::Status CheckLength(const std::string& field, const std::string& value) {
  if (value.size() > kMaxStringBytes) {
    return Invalid(field, absl::StrCat("is ", value.size(), " bytes; at most ", kMaxStringBytes,
                                       " allowed"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateName(const std::string& field, const std::string& value) {
  if (value.empty()) return Invalid(field, "must not be empty");
  if (absl::Status s = CheckLength(field, value); !s.ok()) return s;
  for (unsigned char c : value) {
    if (c < 0x21 || c > 0x7e || c == '/') {
      return Invalid(field, "may hold only printable ASCII without spaces or '/'");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateResourceName(const std::string& field, const std::string& value) {
  if (value.empty()) return Invalid(field, "must not be empty");
  if (value.size() > kMaxResourceNameBytes) {
    return Invalid(field, absl::StrCat("is ", value.size(), " bytes; at most ", kMaxResourceNameBytes));
  }
  if (value == "." || value == "..") return Invalid(field, absl::StrCat("'", value, "' is not a name"));
  for (unsigned char c : value) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '-') {
      return Invalid(field, "may hold only letters, digits, '.', '_' and '-'");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateMountPath(const std::string& field, const std::string& path) {
  if (absl::Status s = CheckLength(field, path); !s.ok()) return s;
  if (path.empty() || path[0] != '/') return Invalid(field, "must be an absolute path");
  if (path == "/") return Invalid(field, "cannot be '/'");
  for (absl::string_view part : absl::StrSplit(absl::string_view(path).substr(1), '/')) {
    if (part.empty() || part == "." || part == "..") {
      return Invalid(field, absl::StrCat("'", path, "' is not normalised (an empty, '.' or '..' part)"));
    }
    for (unsigned char c : part) {
      if (c < 0x20 || c == 0x7f || c == ':') return Invalid(field, "holds a control character or ':'");
    }
  }
  for (const char* reserved : {"/proc", "/dev", "/sys", "/tmp", "/.athanor"}) {
    if (path == reserved || absl::StartsWith(path, absl::StrCat(reserved, "/"))) {
      return Invalid(field, absl::StrCat("'", path, "' is inside ", reserved, ", which the sandbox makes itself"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateJobSpec(const JobSpec& spec) {
  for (const auto& [field, value] :
       {std::pair<std::string, const std::string*>{"spec.name", &spec.name},
        {"spec.tenant", &spec.tenant},
        {"spec.checkpoint_uri", &spec.checkpoint_uri}}) {
    if (absl::Status s = CheckLength(field, *value); !s.ok()) return s;
  }
  // A name is a label shown in listings, logs and terminals: no control characters.
  for (unsigned char c : spec.name) {
    if (c < 0x20 || c == 0x7f) {
      return Invalid("spec.name", absl::StrCat("holds a control character (0x", absl::Hex(c, absl::kZeroPad2),
                                               "); names are printable text"));
    }
  }
  if (spec.nodes < 1) return Invalid("spec.nodes", absl::StrCat("must be >= 1, got ", spec.nodes));
  if (spec.nodes > kMaxNodesPerJob) {
    return Invalid("spec.nodes", absl::StrCat("must be <= ", kMaxNodesPerJob, ", got ", spec.nodes));
  }
  if (spec.gpus_per_node < 1) {
    return Invalid("spec.gpus_per_node", absl::StrCat("must be >= 1, got ", spec.gpus_per_node));
  }
  if (spec.gpus_per_node > kMaxGpusPerNode) {
    return Invalid("spec.gpus_per_node",
                   absl::StrCat("must be <= ", kMaxGpusPerNode, ", got ", spec.gpus_per_node));
  }
  if (spec.min_nodes < 0 || spec.min_nodes > spec.nodes) {
    return Invalid("spec.min_nodes", absl::StrCat("must be in 0..", spec.nodes, " (the job's most nodes), got ",
                                                  spec.min_nodes));
  }
  if (spec.min_nodes > 0 && spec.min_nodes < spec.nodes && spec.interactive) {
    return Invalid("spec.min_nodes", "an interactive instance is not elastic");
  }
  if (spec.global_batch < 0) {
    return Invalid("spec.global_batch", absl::StrCat("must be >= 0, got ", spec.global_batch));
  }
  if (spec.global_batch > 0) {
    // Every size the job may run at keeps the batch: refused now, not at a resize.
    const int least = spec.min_nodes > 0 ? spec.min_nodes : spec.nodes;
    std::vector<int> broken = SizesBreakingGlobalBatch(spec.global_batch, least, spec.nodes, spec.gpus_per_node);
    if (!broken.empty()) {
      return Invalid("spec.global_batch",
                     absl::StrCat("a global batch of ", spec.global_batch, " samples cannot be split evenly over ",
                                  spec.gpus_per_node, " rank(s) per node on ", absl::StrJoin(broken, ", "),
                                  " node(s); pick a multiple of every world size the job may run at"));
    }
  }
  if (spec.max_restarts < 0) {
    return Invalid("spec.max_restarts", absl::StrCat("must be >= 0, got ", spec.max_restarts));
  }
  // Time fields become nanosecond Durations inside the scheduler: a cap keeps
  // the conversion defined (int64 nanoseconds end after about 292 years).
  for (const auto& [field, value] :
       {std::pair<const char*, int64_t>{"spec.time_limit_s", spec.time_limit_s},
        {"spec.grace_period_s", spec.grace_period_s},
        {"spec.idle_timeout_s", spec.idle_timeout_s},
        {"spec.hang_timeout_s", spec.hang_timeout_s}}) {
    if (value < 0 || value > kMaxSeconds) {
      return Invalid(field, absl::StrCat("must be in 0..", kMaxSeconds, " (10 years), got ", value));
    }
  }
  if (spec.notebook && !spec.interactive) {
    return Invalid("spec.notebook", "a notebook is an interactive instance (athanor alloc --notebook)");
  }
  // A notebook job's command is the coordinator's (core/notebook_command.h).
  if (!spec.notebook && (spec.command.empty() || spec.command[0].empty())) {
    return Invalid("spec.command", "must not be empty");
  }
  size_t total = 0;
  for (const std::string& arg : spec.command) {
    total += arg.size() + 1;
    if (arg.find('\0') != std::string::npos) return Invalid("spec.command", "contains a NUL byte");
  }
  for (const auto& [k, v] : spec.env) {
    total += k.size() + v.size() + 2;
    if (k.empty() || k.find('=') != std::string::npos || k.find('\0') != std::string::npos) {
      return Invalid("spec.env", "keys must be non-empty and hold neither '=' nor NUL");
    }
    if (v.find('\0') != std::string::npos) return Invalid("spec.env", "values must not hold NUL");
  }
  if (total > kMaxCommandEnvBytes) {
    return Invalid("spec.command/spec.env", absl::StrCat("total ", total, " bytes; at most ",
                                                         kMaxCommandEnvBytes, " allowed"));
  }
  if (!spec.image.empty()) RETURN_IF_ERROR(ValidateResourceName("spec.image", spec.image));
  if (spec.volumes.size() > kMaxVolumesPerJob) {
    return Invalid("spec.volumes", absl::StrCat(spec.volumes.size(), " mounts; at most ", kMaxVolumesPerJob));
  }
  for (size_t i = 0; i < spec.volumes.size(); ++i) {
    const VolumeMount& v = spec.volumes[i];
    RETURN_IF_ERROR(ValidateResourceName("spec.volumes.name", v.name));
    RETURN_IF_ERROR(ValidateMountPath("spec.volumes.path", v.path));
    for (size_t j = 0; j < i; ++j) {
      const VolumeMount& w = spec.volumes[j];
      if (w.name == v.name) return Invalid("spec.volumes", absl::StrCat("volume '", v.name, "' is mounted twice"));
      if (w.path == v.path || absl::StartsWith(v.path, w.path + "/") || absl::StartsWith(w.path, v.path + "/")) {
        return Invalid("spec.volumes", absl::StrCat("mount paths '", w.path, "' and '", v.path, "' overlap"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateIdempotencyKey(const std::string& key) {
  if (key.size() > kMaxIdempotencyKeyBytes) {
    return Invalid("idempotency_key", absl::StrCat("is ", key.size(), " bytes; at most ",
                                                   kMaxIdempotencyKeyBytes, " allowed"));
  }
  for (unsigned char c : key) {
    if (c < 0x21 || c > 0x7e) return Invalid("idempotency_key", "may hold only printable ASCII");
  }
  return absl::OkStatus();
}

absl::Status ValidateInventory(const NodeInventory& inv) {
  if (inv.gpus < 0 || inv.gpus > kMaxGpusPerNode) {
    return Invalid("inventory.gpus", absl::StrCat("must be in 0..", kMaxGpusPerNode, ", got ", inv.gpus));
  }
  if (inv.cpus < 0) return Invalid("inventory.cpus", "must be >= 0");
  if (inv.memory_mb < 0) return Invalid("inventory.memory_mb", "must be >= 0");
  if (inv.gpu_memory_mb < 0) return Invalid("inventory.gpu_memory_mb", "must be >= 0");
  if (absl::Status s = CheckLength("inventory.gpu_model", inv.gpu_model); !s.ok()) return s;
  size_t total = 0;
  for (const auto& [k, v] : inv.labels) total += k.size() + v.size();
  if (total > kMaxStringBytes) return Invalid("inventory.labels", "too large");
  return absl::OkStatus();
}

}  // namespace athanor::coord
