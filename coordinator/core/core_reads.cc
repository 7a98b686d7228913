#include "coordinator/core/core_reads.h"

#include <optional>

#include "absl/strings/str_cat.h"

namespace athanor::coord {

absl::StatusOr<JobRecord> CoreReads::GetJob(const std::string& id) const {
  std::optional<JobRecord> found;
  core_->Read([&](const ClusterState& s) {
    if (const JobRecord* job = s.jobs().Find(id)) found = *job;
  });
  if (!found) return absl::NotFoundError(absl::StrCat("no job '", id.substr(0, 64), "'"));
  return *std::move(found);
}

std::vector<JobRecord> CoreReads::ListJobs(bool include_finished, const std::string& tenant) const {
  std::vector<JobRecord> out;
  core_->Read([&](const ClusterState& s) {
    for (const auto& [seq, job] : s.jobs().all()) {
      if (!include_finished && IsTerminal(job.state)) continue;
      if (tenant.empty() || job.spec.tenant == tenant) out.push_back(job);
    }
  });
  return out;
}

std::vector<NodeView> CoreReads::ListNodes() const {
  std::vector<NodeView> out;
  core_->Read([&](const ClusterState& s) { out = s.nodes().Views(); });
  return out;
}

std::vector<QuotaRow> CoreReads::Quotas() const {
  std::vector<QuotaRow> out;
  core_->Read([&](const ClusterState& s) { out = s.accounts().Quotas(); });
  return out;
}

std::vector<UsageRow> CoreReads::Usage(const std::string& tenant, double since_unix) const {
  std::vector<UsageRow> out;
  core_->Read(
      [&](const ClusterState& s) { out = s.accounts().Usage(s.jobs().all(), tenant, since_unix); });
  return out;
}

absl::StatusOr<WhyResult> CoreReads::Why(const std::string& id) const {
  absl::StatusOr<WhyResult> out;
  core_->Read([&](const ClusterState& s) { out = s.Why(id); });
  return out;
}

absl::StatusOr<std::vector<LogTarget>> CoreReads::LogTargets(const std::string& job_id,
                                                             int32_t rank, int32_t attempt) const {
  absl::StatusOr<std::vector<LogTarget>> out;
  core_->Read([&](const ClusterState& s) { out = FindLogTargets(s, job_id, rank, attempt); });
  return out;
}

}  // namespace athanor::coord
