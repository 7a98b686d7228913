#include "coordinator/health/rank_reports.h"

#include "absl/strings/str_cat.h"
#include "common/truncate.h"
#include "coordinator/model/validation.h"

namespace athanor::coord {
namespace {

// An agent's word on a rank becomes the job's reason, kept in the store and
// shown by `athanor job`: bounded like any client string, at a word boundary
// and marked when cut. The agent writes the whole of it to the rank's log.
constexpr size_t kMaxRankMessageBytes = kMaxStringBytes;

}  // namespace

bool ApplyRankReport(const RankReport& r, RankStatus* st) {
  if (st->exited) return false;
  if (r.phase == RankPhase::kRunning) {
    if (st->started) return false;
    st->started = true;
    return true;
  }
  st->started = st->started || r.phase == RankPhase::kExited;
  st->exited = true;
  st->exit_code = r.phase == RankPhase::kFailedToStart && r.exit_code == 0 ? 127 : r.exit_code;
  st->signal = r.signal;
  st->message = TruncateAtWord(r.message, kMaxRankMessageBytes);
  return true;
}

AttemptVerdict JudgeAttempt(const std::vector<RankStatus>& ranks) {
  bool all_started = true, all_ok = true;
  AttemptVerdict v;
  for (const RankStatus& st : ranks) {
    all_started = all_started && st.started;
    all_ok = all_ok && st.exited && st.exit_code == 0;
    if (st.exited && st.exit_code != 0 &&
        (v.failed == nullptr || (v.failed->signal == 0 && st.signal != 0))) {
      v.failed = &st;
    }
  }
  using Kind = AttemptVerdict::Kind;
  v.kind = v.failed != nullptr ? Kind::kFailed
           : all_ok            ? Kind::kSucceeded
           : all_started       ? Kind::kAllStarted
                               : Kind::kUnchanged;
  return v;
}

std::string RankFailure(const std::vector<RankPlacement>& allocation, const RankStatus& st) {
  const std::string& node = allocation[st.rank].node;  // allocation is by rank
  std::string how = st.signal != 0 ? absl::StrCat("was killed by signal ", st.signal,
                                                  " (exit code ", st.exit_code, ")")
                                   : absl::StrCat("exited with code ", st.exit_code);
  if (!st.message.empty()) absl::StrAppend(&how, ": ", st.message);  // e.g. "out of memory"
  return absl::StrCat("rank ", st.rank, " on node ", node, " ", how);
}

}  // namespace athanor::coord
