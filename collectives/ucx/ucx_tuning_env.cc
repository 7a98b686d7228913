#include "collectives/ucx/ucx_tuning_env.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status.h"

namespace athanor {
namespace {

constexpr uint64_t kKiB = 1024, kMiB = kKiB << 10, kGiB = kMiB << 10;

absl::Status Bad(const char* name, absl::string_view value, absl::string_view accepts) {
  return absl::InvalidArgumentError(
      absl::StrCat(name, "='", value, "' is not valid: expected ", accepts));
}

// A whole number in [lo, hi], with an optional K/M/G suffix when `sizes`.
absl::StatusOr<uint64_t> ParseNumber(const char* name, absl::string_view value, uint64_t lo,
                                     uint64_t hi, bool sizes) {
  const std::string accepts = absl::StrCat(sizes ? "a size in bytes (K/M/G suffixes allowed)"
                                                 : "a whole number",
                                           " from ", lo, " to ", hi);
  absl::string_view digits = value;
  uint64_t unit = 1;
  if (sizes && !digits.empty()) {
    switch (digits.back()) {
      case 'K': case 'k': unit = kKiB; break;
      case 'M': case 'm': unit = kMiB; break;
      case 'G': case 'g': unit = kGiB; break;
      default: break;
    }
    if (unit != 1) digits.remove_suffix(1);
  }
  // SimpleAtoi takes a sign and surrounding spaces; a knob takes neither.
  uint64_t n = 0;
  if (digits.empty() || digits.find_first_not_of("0123456789") != absl::string_view::npos ||
      !absl::SimpleAtoi(digits, &n) || n > std::numeric_limits<uint64_t>::max() / unit) {
    return Bad(name, value, accepts);
  }
  n *= unit;
  if (n < lo || n > hi) return Bad(name, value, accepts);
  return n;
}

// Applies the variable `name`, when set, to `*field` (an integer or size_t).
template <typename T>
absl::Status Number(const EnvLookup& lookup, const char* name, uint64_t lo, uint64_t hi,
                    bool sizes, T* field) {
  const std::optional<std::string> v = lookup(name);
  if (!v.has_value()) return absl::OkStatus();
  ASSIGN_OR_RETURN(uint64_t n, ParseNumber(name, *v, lo, hi, sizes));
  *field = static_cast<T>(n);
  return absl::OkStatus();
}

absl::Status Switch(const EnvLookup& lookup, const char* name, bool* field) {
  const std::optional<std::string> v = lookup(name);
  if (!v.has_value()) return absl::OkStatus();
  const absl::string_view s(*v);
  if (s != "0" && s != "1") return Bad(name, s, "0 or 1");
  *field = s == "1";
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<UcxTuning> UcxTuningFromEnv(const EnvLookup& lookup, UcxTuning t) {
  constexpr uint64_t kMaxBuffer = 1 * kGiB;  // one chunk, segment or slot
  constexpr uint64_t kMaxCall = uint64_t{1} << 50;  // thresholds on a call's size
  // Tag schedules: pipeline segment bytes, chains in flight, recursive doubling's limit.
  RETURN_IF_ERROR(Number(lookup, "ATHANOR_UCX_SEGMENT_BYTES", 64, kMaxBuffer, true, &t.segment_bytes));
  RETURN_IF_ERROR(Number(lookup, "ATHANOR_UCX_WINDOW", 1, 1024, false, &t.window));
  RETURN_IF_ERROR(Number(lookup, "ATHANOR_UCX_SMALL_BYTES", 0, kMaxBuffer, true, &t.small_bytes));
  RETURN_IF_ERROR(Switch(lookup, "ATHANOR_UCX_PROGRESS_THREAD", &t.progress_thread));
  RETURN_IF_ERROR(Number(lookup, "ATHANOR_UCX_WAIT_NAP_US", 0, 1000000, false, &t.wait_nap_us));
  // One host's shared memory.
  RETURN_IF_ERROR(Switch(lookup, "ATHANOR_UCX_SHARED", &t.shared_memory));
  RETURN_IF_ERROR(Number(lookup, "ATHANOR_UCX_SHARED_MIN_BYTES", 0, kMaxCall, true, &t.shared_min_bytes));
  RETURN_IF_ERROR(Number(lookup, "ATHANOR_UCX_SHARED_CHUNK_BYTES", 4 * kKiB, kMaxBuffer, true,
                         &t.shared_chunk_bytes));
  RETURN_IF_ERROR(Number(lookup, "ATHANOR_UCX_SHARED_SLOTS", 2, 256, false, &t.shared_slots));
  RETURN_IF_ERROR(Number(lookup, "ATHANOR_UCX_SHARED_ONE_SHOT_BYTES", 0, 1 * kMiB, true,
                         &t.shared_one_shot_bytes));
  // Across hosts.
  RETURN_IF_ERROR(Switch(lookup, "ATHANOR_UCX_HIERARCHICAL", &t.hierarchical));
  RETURN_IF_ERROR(Number(lookup, "ATHANOR_UCX_HIERARCHICAL_MIN_BYTES", 0, kMaxCall, true,
                         &t.hierarchical_min_bytes));
  RETURN_IF_ERROR(Number(lookup, "ATHANOR_UCX_HIERARCHICAL_CHUNK_BYTES", 4 * kKiB, kMaxBuffer, true,
                         &t.hierarchical_chunk_bytes));
  RETURN_IF_ERROR(Number(lookup, "ATHANOR_UCX_HIERARCHICAL_SLOTS", 2, 256, false, &t.hierarchical_slots));
  RETURN_IF_ERROR(Number(lookup, "ATHANOR_UCX_HIERARCHICAL_RING_MIN_BYTES", 0, kMaxCall, true,
                         &t.hierarchical_ring_min_bytes));
  if (const std::optional<std::string> v = lookup("ATHANOR_UCX_HIERARCHICAL_SOCKETS")) {
    const absl::string_view s(*v);
    if (s != "0" && s != "1" && s != "auto") {
      return Bad("ATHANOR_UCX_HIERARCHICAL_SOCKETS", s, "0 (never), 1 (always) or auto");
    }
    t.hierarchical_sockets = s == "auto" ? -1 : s == "1" ? 1 : 0;
  }
  RETURN_IF_ERROR(Number(lookup, "ATHANOR_UCX_SOCKET_BUFFER_BYTES", 0, 1 * kGiB, true,
                         &t.socket_buffer_bytes));
  return t;
}

}  // namespace athanor
