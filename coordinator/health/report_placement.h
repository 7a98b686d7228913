// Which of an agent's rank reports the coordinator may act on. An agent is
// trusted for its own node only: a report counts when its rank is placed on
// that node in the job's current attempt. Everything else is dropped before
// any part of the core sees it (job state, hang detection, the node's running
// set), so one node's certificate cannot end, hang or keep alive another
// node's ranks.
//
// Pure functions over the records (and one log line); no threading of their own.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "coordinator/model/types.h"

namespace athanor::coord {

enum class ReportFit {
  kPlaced,   // the rank is placed on the node in the job's current attempt
  kStale,    // an earlier attempt that had ranks on the node (a normal late report)
  kForeign,  // anything else: another node's rank, an unknown job or attempt
};

// `job` is null for an unknown job. For a foreign report `why` (may be null)
// says what is wrong with it, with every byte from the agent escaped.
ReportFit FitOf(const JobRecord* job, const std::string& node, const RankReport& report,
                std::string* why = nullptr);

// Finds a job by id; null when unknown.
using FindJob = std::function<const JobRecord*(const std::string& id)>;

// The reports of `reports` that are kPlaced on `node`. Foreign ones are
// dropped and logged in one WARNING per call (DescribeForeign); stale ones
// are dropped silently.
std::vector<RankReport> PlacedReports(const std::string& node, const std::vector<RankReport>& reports,
                                      const FindJob& find);

// "node N reported K rank(s) not placed on it; ignored: WHY; WHY; WHY (and M
// more)", naming at most three. Exposed for tests.
std::string DescribeForeign(const std::string& node, const std::vector<std::string>& whys);

}  // namespace athanor::coord
