#include "checkpoint/layout.h"

#include <charconv>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace athanor::ckpt_layout {

std::string JobPrefix(const std::string& job) { return absl::StrCat(job, "/"); }

std::string StepPrefix(const std::string& job, int64_t step) {
  return absl::StrFormat("%s/step-%010d/", job, step);
}

std::string ShardKey(const std::string& job, int64_t step, int rank, int world_size) {
  return absl::StrFormat("%srank-%05d-of-%05d.safetensors", StepPrefix(job, step), rank, world_size);
}

std::string ManifestKey(const std::string& job, int64_t step, int rank) {
  return absl::StrFormat("%srank-%05d.json", StepPrefix(job, step), rank);
}

std::string CommitKey(const std::string& job, int64_t step) {
  return absl::StrCat(StepPrefix(job, step), "COMMIT");
}

std::optional<int64_t> StepOfKey(const std::string& job, const std::string& key) {
  std::string prefix = absl::StrCat(job, "/step-");
  if (!absl::StartsWith(key, prefix) || key.size() < prefix.size() + 11) return std::nullopt;
  const char* begin = key.data() + prefix.size();
  if (begin[10] != '/') return std::nullopt;
  int64_t step = 0;
  auto [ptr, ec] = std::from_chars(begin, begin + 10, step);
  if (ec != std::errc() || ptr != begin + 10) return std::nullopt;
  return step;
}

bool IsCommitKey(const std::string& key) { return absl::EndsWith(key, "/COMMIT"); }

}  // namespace athanor::ckpt_layout
