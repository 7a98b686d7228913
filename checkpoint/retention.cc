#include "checkpoint/retention.h"

#include <algorithm>
#include <vector>

#include "checkpoint/catalog.h"
#include "checkpoint/layout.h"
#include "common/logging.h"
#include "common/status.h"

namespace athanor {
namespace {

// Deletes every object of one step, COMMIT first.
absl::Status DeleteStep(ObjectStore* store, const std::string& job, int64_t step,
                        const std::vector<ObjectInfo>& objects) {
  std::string commit = ckpt_layout::CommitKey(job, step);
  RETURN_IF_ERROR(store->Delete(commit));
  for (const ObjectInfo& info : objects) {
    if (info.key != commit) RETURN_IF_ERROR(store->Delete(info.key));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RetentionReport> ApplyRetention(ObjectStore* store, const std::string& job,
                                               const RetentionOptions& options) {
  RetentionReport report;
  ASSIGN_OR_RETURN(JobScan scan, ScanJob(store, job));
  if (scan.committed_steps.empty()) return report;
  const int64_t newest = *scan.committed_steps.rbegin();
  const size_t keep = static_cast<size_t>(std::max(1, options.keep_last));
  std::vector<int64_t> committed(scan.committed_steps.begin(), scan.committed_steps.end());
  for (size_t i = 0; i + keep < committed.size(); ++i) {
    RETURN_IF_ERROR(DeleteStep(store, job, committed[i], scan.objects_by_step[committed[i]]));
    ++report.committed_deleted;
  }
  for (const auto& [step, objects] : scan.objects_by_step) {
    if (step < newest && !scan.committed_steps.count(step)) {
      RETURN_IF_ERROR(DeleteStep(store, job, step, objects));
      ++report.uncommitted_deleted;
    }
  }
  absl::StatusOr<std::vector<PendingUpload>> uploads =
      store->ListPendingUploads(ckpt_layout::JobPrefix(job));
  if (!uploads.ok()) {
    // Some S3-compatible servers (s3rver) lack ListMultipartUploads; not fatal.
    if (absl::IsUnimplemented(uploads.status())) return report;
    ATHANOR_LOG(WARNING) << "cannot list pending uploads in " << store->Describe() << ": "
                         << uploads.status().ToString();
    return report;
  }
  for (const PendingUpload& upload : *uploads) {
    std::optional<int64_t> step = ckpt_layout::StepOfKey(job, upload.key);
    // A committed step's shards were all closed before its COMMIT: whatever
    // is still pending there is left over from an attempt that crashed.
    if (!step || (*step >= newest && !scan.committed_steps.count(*step))) continue;
    RETURN_IF_ERROR(store->AbortPendingUpload(upload));
    ++report.uploads_aborted;
  }
  return report;
}

}  // namespace athanor
