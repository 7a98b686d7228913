#include "checkpoint/catalog.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "checkpoint/layout.h"
#include "checkpoint/manifest.h"
#include "common/logging.h"
#include "common/status.h"

namespace athanor {

absl::StatusOr<JobScan> ScanJob(ObjectStore* store, const std::string& job) {
  ASSIGN_OR_RETURN(std::vector<ObjectInfo> objects, store->List(ckpt_layout::JobPrefix(job)));
  JobScan scan;
  for (ObjectInfo& info : objects) {
    std::optional<int64_t> step = ckpt_layout::StepOfKey(job, info.key);
    if (!step) continue;
    if (info.key == ckpt_layout::CommitKey(job, *step)) scan.committed_steps.insert(*step);
    scan.objects_by_step[*step].push_back(std::move(info));
  }
  return scan;
}

absl::StatusOr<std::vector<CommittedStep>> ListCommitted(ObjectStore* store, const std::string& job) {
  ASSIGN_OR_RETURN(JobScan scan, ScanJob(store, job));
  std::vector<CommittedStep> out;
  for (int64_t step : scan.committed_steps) {
    std::string key = ckpt_layout::CommitKey(job, step);
    absl::StatusOr<std::string> text = store->Get(key, 0, -1);
    absl::StatusOr<CommitRecord> commit =
        text.ok() ? DecodeCommit(*text) : absl::StatusOr<CommitRecord>(text.status());
    if (!commit.ok()) {
      ATHANOR_LOG(WARNING) << "skipping " << store->Describe() << "/" << key << ": "
                           << commit.status().ToString();
      continue;
    }
    out.push_back(CommittedStep{step, commit->TotalBytes(), commit->commit_unix, commit->world_size});
  }
  return out;
}

std::string FormatCommittedTable(const std::vector<CommittedStep>& steps) {
  std::string out = absl::StrFormat("%-12s %14s %-20s %s\n", "STEP", "BYTES", "COMMITTED (UTC)", "WORLD");
  for (const CommittedStep& s : steps) {
    absl::StrAppendFormat(&out, "%-12d %14d %-20s %d\n", s.step, s.total_bytes,
                          absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::FromUnixSeconds(s.commit_unix),
                                           absl::UTCTimeZone()),
                          s.world_size);
  }
  return out;
}

std::string FormatCommittedJson(const std::vector<CommittedStep>& steps) {
  nlohmann::json out = nlohmann::json::array();
  for (const CommittedStep& s : steps) {
    out.push_back({{"step", s.step}, {"total_bytes", s.total_bytes},
                   {"commit_unix", s.commit_unix}, {"world_size", s.world_size}});
  }
  return out.dump() + "\n";
}

}  // namespace athanor
