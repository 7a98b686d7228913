// Object names of the stable checkpoint layout (docs/formats.md):
//   <job>/step-<10 digits>/rank-<5 digits>-of-<5 digits>.safetensors
//   <job>/step-<10 digits>/rank-<5 digits>.json
//   <job>/step-<10 digits>/COMMIT
// Keys are relative to the store root. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace athanor::ckpt_layout {

std::string JobPrefix(const std::string& job);                 // "job/"
std::string StepPrefix(const std::string& job, int64_t step);  // "job/step-0000000042/"
std::string ShardKey(const std::string& job, int64_t step, int rank, int world_size);
std::string ManifestKey(const std::string& job, int64_t step, int rank);
std::string CommitKey(const std::string& job, int64_t step);

// The step of any key below JobPrefix(job) ("job/step-0000000042/x" -> 42).
std::optional<int64_t> StepOfKey(const std::string& job, const std::string& key);
// True when `key` is a COMMIT object.
bool IsCommitKey(const std::string& key);

}  // namespace athanor::ckpt_layout
