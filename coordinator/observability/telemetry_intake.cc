#include "coordinator/observability/telemetry_intake.h"

#include <cmath>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "coordinator/core/core_reads.h"
#include "coordinator/health/report_placement.h"
#include "coordinator/wire/proto_convert.h"

namespace athanor::coord {

absl::Status TakeTelemetry(const rpc::HeartbeatRequest& req, int64_t now_ms, TelemetryStore* store,
                           CoordinatorCore* core) {
  if (req.telemetry_size() > kMaxTelemetryJobs) {
    return absl::InvalidArgumentError(absl::StrCat("telemetry: ", req.telemetry_size(),
                                                   " jobs in one heartbeat (at most ", kMaxTelemetryJobs, ")"));
  }
  if (req.gpus_size() > kMaxGpuSamples) {
    return absl::InvalidArgumentError(
        absl::StrCat("gpus: ", req.gpus_size(), " samples (at most ", kMaxGpuSamples, ")"));
  }
  for (const rpc::JobTelemetry& t : req.telemetry()) {
    if (t.job_id().empty() || t.job_id().size() > 64) {
      return absl::InvalidArgumentError("telemetry: job_id must have 1 to 64 bytes");
    }
    if (t.samples_size() > kMaxTelemetrySamples) {
      return absl::InvalidArgumentError(absl::StrCat("telemetry of job ", t.job_id(), ": ", t.samples_size(),
                                                     " samples (at most ", kMaxTelemetrySamples, ")"));
    }
  }
  std::vector<std::string> foreign;
  for (const rpc::JobTelemetry& t : req.telemetry()) {
    // Only a node running a rank of the job's current attempt speaks for it.
    if (t.samples_size() == 0) continue;
    absl::StatusOr<JobRecord> job = CoreReads(core).GetJob(t.job_id());
    if (job.ok() && t.attempt() > 0 && t.attempt() < job->attempt) continue;  // late, of an earlier attempt
    bool placed = false;
    if (job.ok() && t.attempt() == job->attempt) {
      for (const RankPlacement& p : job->allocation) placed = placed || p.node == req.node();
    }
    if (!placed) {
      foreign.push_back(absl::StrCat("telemetry of job '", absl::CHexEscape(t.job_id()), "' attempt ",
                                     t.attempt()));
      continue;
    }
    std::vector<TelemetryFigures> samples;
    for (const rpc::TelemetrySample& s : t.samples()) {
      if (s.step() < 0 || !std::isfinite(s.loss())) continue;  // not a figure to chart
      samples.push_back(FromProto(s));
      samples.back().attempt = t.attempt();
    }
    if (samples.empty()) continue;
    const bool due = store->Add(t.job_id(), samples, now_ms);
    // An elastic job's newest figures go with every report: a resize may come
    // at any moment, and its record says how many steps past the checkpoint
    // it threw away (elastic_resize.h, StepsPastCheckpoint).
    if (!due && !(job.ok() && job->spec.elastic())) continue;
    const std::string id = t.job_id();
    core->RecordTelemetry(id, samples.back(), [id](absl::Status s) {
      // A job the coordinator no longer knows is not worth a warning.
      if (!s.ok() && !absl::IsNotFound(s)) ATHANOR_LOG(WARNING) << "job " << id << ": telemetry: " << s;
    });
  }
  if (!foreign.empty()) ATHANOR_LOG(WARNING) << DescribeForeign(req.node(), foreign);
  std::map<int32_t, GpuReading> gpus;
  for (const rpc::GpuSample& g : req.gpus()) {
    if (g.index() < 0 || g.index() > 1024) continue;
    gpus[g.index()] = {g.utilization(), g.memory_used_mb(), now_ms};
  }
  store->SetGpus(req.node(), std::move(gpus));
  return absl::OkStatus();
}

}  // namespace athanor::coord
