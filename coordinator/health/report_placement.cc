#include "coordinator/health/report_placement.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace athanor::coord {
namespace {

constexpr size_t kMaxIdBytes = 64;  // of an agent-given job id, in a log line
constexpr size_t kNamed = 3;        // foreign reports named per log line

// An agent-given string for a log line: control characters and other
// non-printable bytes escaped (no forged log lines), and capped.
std::string Quote(const std::string& s) {
  std::string out = absl::CHexEscape(s.substr(0, kMaxIdBytes));
  return absl::StrCat("'", out, s.size() > kMaxIdBytes ? "'..." : "'");
}

}  // namespace

ReportFit FitOf(const JobRecord* job, const std::string& node, const RankReport& r,
                std::string* why) {
  auto foreign = [&](const std::string& what) {
    if (why != nullptr) {
      *why = absl::StrCat("job ", Quote(r.job_id), " attempt ", r.attempt, " rank ", r.rank, ": ", what);
    }
    return ReportFit::kForeign;
  };
  if (job == nullptr) return foreign("no such job");
  if (r.attempt <= 0 || r.attempt > job->attempt) {
    return foreign(absl::StrCat("not an attempt of the job (current: ", job->attempt, ")"));
  }
  if (r.attempt < job->attempt) {
    // A late report of an earlier attempt: stale if that attempt ran here.
    if (static_cast<size_t>(r.attempt) > job->attempt_nodes.size()) return ReportFit::kStale;
    const std::vector<std::string>& nodes = job->attempt_nodes[r.attempt - 1];
    if (std::find(nodes.begin(), nodes.end(), node) != nodes.end()) return ReportFit::kStale;
    return foreign("that attempt had no rank on this node");
  }
  for (const RankPlacement& p : job->allocation) {
    if (p.rank != r.rank) continue;
    if (p.node == node) return ReportFit::kPlaced;
    return foreign(absl::StrCat("placed on node ", p.node));
  }
  return foreign(absl::StrCat("not a rank of the attempt (", job->allocation.size(), " ranks)"));
}

std::vector<RankReport> PlacedReports(const std::string& node, const std::vector<RankReport>& reports,
                                      const FindJob& find) {
  std::vector<RankReport> out;
  out.reserve(reports.size());
  std::vector<std::string> foreign;
  for (const RankReport& r : reports) {
    std::string why;
    switch (FitOf(find(r.job_id), node, r, &why)) {
      case ReportFit::kPlaced:
        out.push_back(r);
        break;
      case ReportFit::kStale:
        break;
      case ReportFit::kForeign:
        foreign.push_back(std::move(why));
        break;
    }
  }
  if (!foreign.empty()) ATHANOR_LOG(WARNING) << DescribeForeign(node, foreign);
  return out;
}

std::string DescribeForeign(const std::string& node, const std::vector<std::string>& whys) {
  if (whys.empty()) return "";
  std::string out = absl::StrCat("node ", Quote(node), " reported ", whys.size(),
                                 " rank(s) not placed on it; ignored: ");
  for (size_t i = 0; i < whys.size() && i < kNamed; ++i) absl::StrAppend(&out, i > 0 ? "; " : "", whys[i]);
  if (whys.size() > kNamed) absl::StrAppend(&out, " (and ", whys.size() - kNamed, " more)");
  return out;
}

}  // namespace athanor::coord
