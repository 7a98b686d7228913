// HangDetector: turns the progress ranks report (through their agents'
// heartbeats) into hang verdicts and straggler flags, per attempt. Pure: no
// I/O; time from the injected Clock (docs/operations.md, "Hangs and
// stragglers").
//
// Progress of a rank is a change of its finished step or of its collective
// issue number. An attempt hangs when no rank of it has progressed for its
// timeout, or when a rank whose process is stopped has not for that long
// (whatever its peers still finish before they block on it): the job's own (JobSpec::hang_timeout_s), else the larger of
// `min_timeout` and `step_multiple` x the attempt's median step time. Only
// ranks that publish a progress page are watched; an attempt none of whose
// ranks has shown one is never judged.
//
// The suspect is, in order: a rank with a stopped process; a rank that has
// not entered the collective its peers are blocked in (not waiting, or at a
// lower issue number); the rank whose progress stopped first.
//
// A verdict says whether the job caused the hang itself (HangCause): a
// stopped process, or ranks all idle outside any collective, is the job's
// own doing; only a hang inside or around a collective may point at the
// suspect's node (and counts for auto-drain, SuspectLedger).
//
// Stragglers: at the end of every `window`, each rank's median compute time
// per step (collective waits excluded) is compared with the median of the
// other ranks' samples, over that window alone and over the pooled samples of
// the last `straggler_windows` windows. A rank is flagged once it was above
// `straggler_ratio` x the others in each of those windows and over their
// span, and unflagged once the span no longer is. Both together keep a noisy
// machine from flagging a steady rank: one slow burst (a window of CPU
// contention) can lift a span's median, but not every window.
//
// Not thread-safe: confined to ClusterState's owner. The Clock is not owned.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "coordinator/model/hang_options.h"
#include "coordinator/model/types.h"

namespace athanor::coord {


enum class HangCause {
  kStoppedProcess,  // a process of a rank is stopped: the job's own (or its owner's) doing
  kIdle,            // no rank in a collective and none progressing: the job's own code waits
  kCollective,      // a collective cannot complete: may be the suspect's node or network
};

// Whether a hang of `cause` is evidence against the suspect's node.
inline bool CountsAgainstNode(HangCause cause) { return cause == HangCause::kCollective; }

struct HangVerdict {
  std::string job_id;
  int32_t attempt = 0;
  int32_t suspect = -1;  // -1: none could be named
  std::string node;      // the suspect's
  std::string reason;    // "hang: rank 3 on node-b made no progress for 31 s (...)"
  double stalled_s = 0;  // since the attempt's last progress
  HangCause cause = HangCause::kCollective;
};

class HangDetector {
 public:
  HangDetector(HangOptions options, const Clock* clock) : options_(options), clock_(clock) {}

  // A running rank's report from `node`'s heartbeat.
  void Observe(const std::string& node, const RankReport& report);
  // The attempts of `jobs` (running, not stopping) that hang now. A job's
  // older attempts are forgotten; attempts of jobs not listed are dropped.
  std::vector<HangVerdict> Check(const std::vector<const JobRecord*>& running);
  // The current straggler flags of `job_id`'s `attempt`.
  std::vector<RankFlag> Stragglers(const std::string& job_id, int32_t attempt) const;
  // The timeout `job` gets now (its own one at least HangOptions::timeout_floor).
  Duration Timeout(const JobRecord& job) const;
  // A straggler window shorter than this is stretched to it. Samples arrive
  // once per heartbeat, so a window shorter than the heartbeat interval (a
  // large fleet's paced one) would see none and never find a rank slow.
  void SetMinWindow(Duration d) { min_window_ = d; }

 private:
  struct RankTrack {
    std::string node;
    RankProgressView last;
    TimePoint last_change{};
    std::vector<double> window_compute_ms;  // samples of this window
    std::deque<std::vector<double>> recent;  // the last straggler_windows windows' samples
    std::deque<bool> slow_windows;           // ... whether each alone was above the ratio
    bool flagged = false;
    double ratio = 0;
  };
  struct AttemptTrack {
    int32_t attempt = 0;
    std::map<int32_t, RankTrack> ranks;
    std::vector<double> step_ms;  // recent step times (for the median)
    TimePoint window_start{};
  };
  static std::string Key(const std::string& job, int32_t attempt);
  HangVerdict Judge(const JobRecord& job, const AttemptTrack& a, TimePoint now) const;
  void CloseWindow(const std::string& job_id, AttemptTrack* a);

  const HangOptions options_;
  const Clock* const clock_;
  Duration min_window_{};
  std::map<std::string, AttemptTrack> attempts_;  // by job id
};

// Counts, per node, the tenants whose jobs' hangs named it suspect; says when
// one should be drained: hangs of `drain_after` different tenants' jobs
// within drain_window. A tenant counts once however often its jobs hang
// there, so the evidence never rests on one tenant. Only hangs that
// CountsAgainstNode are struck. Not thread-safe.
class SuspectLedger {
 public:
  SuspectLedger(const HangOptions* options, const Clock* clock) : options_(options), clock_(clock) {}
  // Records a strike of `tenant`'s job; true when `node` now has enough to be
  // drained (its strikes are then cleared).
  bool Strike(const std::string& node, const std::string& tenant);

 private:
  const HangOptions* const options_;
  const Clock* const clock_;
  std::map<std::string, std::map<std::string, TimePoint>> strikes_;  // node -> tenant -> newest
};

}  // namespace athanor::coord
