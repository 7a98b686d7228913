#include "worker/agent/checkpoint_counters.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace athanor::agent {
namespace {

constexpr size_t kMaxStatsFile = 4096;

bool NonNegative(const nlohmann::json& j, const char* key, double* out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return false;
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < 0 || v > 1e18) return false;
  *out = v;
  return true;
}

UploadFigures Plus(const UploadFigures& a, const UploadFigures& b) {
  return {a.uploads + b.uploads, a.failures + b.failures, a.bytes + b.bytes, a.seconds + b.seconds};
}

}  // namespace

absl::StatusOr<ServiceStats> ReadServiceStats(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": no upload yet"));
  std::string text(kMaxStatsFile + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxStatsFile) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": over ", kMaxStatsFile, " bytes"));
  }
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  }
  double pid = 0, uploaded = 0, failed = 0;
  ServiceStats s;
  for (auto [key, out] : {std::pair<const char*, double*>{"pid", &pid}, {"uploaded", &uploaded},
                          {"failed", &failed}, {"bytes", &s.totals.bytes},
                          {"upload_seconds", &s.totals.seconds}}) {
    if (!NonNegative(j, key, out)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": '", key, "' is missing or not a non-negative number"));
    }
  }
  s.pid = static_cast<int64_t>(pid);
  s.totals.uploads = static_cast<uint64_t>(uploaded);
  s.totals.failures = static_cast<uint64_t>(failed);
  return s;
}

void ServiceUploadCounter::Observe(const ServiceStats& stats) {
  if (stats.pid != pid_) {
    finished_runs_ = Plus(finished_runs_, current_);
    current_ = {};
    pid_ = stats.pid;
  }
  // Within a run the totals only grow; keep the larger reading of each.
  current_.uploads = std::max(current_.uploads, stats.totals.uploads);
  current_.failures = std::max(current_.failures, stats.totals.failures);
  current_.bytes = std::max(current_.bytes, stats.totals.bytes);
  current_.seconds = std::max(current_.seconds, stats.totals.seconds);
}

UploadFigures ServiceUploadCounter::total() const { return Plus(finished_runs_, current_); }

}  // namespace athanor::agent
