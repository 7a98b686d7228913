// The coordinator's intake of telemetry carried by heartbeats: checks its
// counts and sizes, feeds the TelemetryStore, and has the core persist a
// job's newest figures when the store says it is time. Runs on the gRPC
// thread of the heartbeat, before the core sees the heartbeat; takes the
// core's state lock only to persist (every ~30 s per job).
#pragma once

#include "absl/status/status.h"
#include "coordinator/core/coordinator_core.h"
#include "coordinator/observability/telemetry_store.h"
#include "proto/athanor.pb.h"

namespace athanor::coord {

inline constexpr int kMaxTelemetryJobs = 256;     // per heartbeat
inline constexpr int kMaxTelemetrySamples = 64;   // per job and heartbeat
inline constexpr int kMaxGpuSamples = 256;        // per heartbeat

// InvalidArgument naming what was out of bounds (nothing is taken then).
absl::Status TakeTelemetry(const rpc::HeartbeatRequest& req, int64_t now_ms, TelemetryStore* store,
                           CoordinatorCore* core);

}  // namespace athanor::coord
