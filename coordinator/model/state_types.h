// Options and result rows of the coordinator's state (ClusterState and its
// parts). Value types.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "coordinator/model/hang_options.h"
#include "coordinator/model/types.h"
#include "coordinator/scheduler/types.h"
#include "proto/athanor_billing.pb.h"
#include "proto/athanor_data.pb.h"
#include "proto/athanor_interactive.pb.h"

namespace athanor::coord {

class HeartbeatPace;  // health/heartbeat_pace.h

struct StateOptions {
  Duration heartbeat_timeout = Seconds(10);
  // Not owned; when set, its Timeout() replaces heartbeat_timeout and each
  // tick tells it the fleet's size (heartbeat_pace.h).
  HeartbeatPace* heartbeat_pace = nullptr;
  int32_t master_port_min = 29500;
  int32_t master_port_max = 29999;
  int64_t kill_after_ms = 5000;        // SIGTERM -> SIGKILL for stopped ranks
  std::string coordinator_address;     // ATHANOR_COORDINATOR seen by ranks
  // --job-network CIDR: each attempt gets a /24 of it and its ranks a network
  // of their own (core/job_network.h); "" off. Parsed by main.cc first.
  std::string job_network;
  Duration default_grace = sched::kDefaultGrace;  // preemption grace when a job names none
  Duration min_run_time = sched::kDefaultMinRunTime;  // before the scheduler may preempt a job again
  bool backfill = true;
  sched::SchedulingPolicy scheduling_policy = sched::SchedulingPolicy::kDefault;  // --scheduling-policy
  Duration age_limit = sched::SchedulerOptions{}.age_limit;  // --age-limit-s; zero: no ageing
  bool keep_head = sched::SchedulerOptions{}.keep_head;        // --keep-head
  bool strict_fair_share = sched::SchedulerOptions{}.strict_fair_share;  // --strict-fair-share
  Duration las_recall_after = sched::LasOptions{}.recall_after;  // --las-recall-after-s; zero: never
  std::map<std::string, int32_t> quotas;  // tenant -> GPUs (--quota); the store's win
  Duration idle_reclaim_grace = Seconds(60);  // idle warning -> reclaim
  // Use of an interactive instance (tenant_accounts.h): at least this share
  // of one core (x100: GPU utilisation %), these bytes per second in and out
  // of its network or written to disk.
  double idle_cpu_fraction = 0.01;
  double idle_net_bytes_per_s = 64 * 1024;
  double idle_disk_bytes_per_s = 64 * 1024;
  // Billing: attempts holding GPUs are charged at least this often (and
  // when they release them); a tenant's credit is checked as often.
  Duration billing_interval = Seconds(60);
  // Run a scheduling pass inside every operation that may let a job start
  // (submit, exits, registrations). Off, the owner calls Schedule() itself:
  // the coordinator does, from its own loop, so that a storm of submissions
  // shares passes instead of running one each.
  bool schedule_inline = true;
  // A requeued job waits at most this long for a newer checkpoint step its
  // ranks handed off to finish uploading (checkpoint_uploads.h).
  Duration checkpoint_upload_wait = Seconds(600);
  // A requeued job waits at most this long for its ended attempt's
  // read-write volumes to be stored back (volumes/owed_stores.h).
  Duration volume_store_wait = Seconds(600);
  // Instance snapshots each tenant keeps (--snapshot-keep; the oldest go).
  int32_t snapshot_keep = 5;
  HangOptions hangs;  // hang detection, auto-drain, stragglers (hang_options.h)
};

struct QuotaRow {
  std::string tenant;
  int32_t gpus = 0;
  int32_t gpus_in_use = 0;
};

struct UsageRow {
  std::string tenant;
  std::string job_id;  // empty on a tenant's total
  double gpu_seconds = 0;
  int32_t gpus_in_use = 0;
};

struct WhyResult {
  JobState state = JobState::kPending;
  std::vector<std::string> reasons;
  int32_t queue_position = 0;
};

// A node as listed: its record and what runs there.
struct NodeView {
  NodeRecord record;
  int32_t gpus_allocated = 0;
  std::vector<std::string> jobs;  // ids of jobs holding GPUs there, by submission
  std::vector<std::string> cached_images;  // digests in its agent's image cache, as last heard
};

// An image record to write, or (`removed`) to delete by (tenant, name).
struct ImageChange {
  rpc::Image image;
  bool removed = false;
};

// A volume record to write, or (`removed`) to delete by (tenant, name).
struct VolumeChange {
  rpc::Volume volume;
  bool removed = false;
};

// An instance snapshot's record to write, or (`removed`) to delete by id.
struct SnapshotChange {
  rpc::InstanceSnapshot snapshot;
  bool removed = false;
};

// Records to persist after one or more operations.
struct Changes {
  std::vector<JobRecord> jobs;
  std::vector<NodeRecord> nodes;
  std::map<std::string, int32_t> quotas;  // tenant -> GPUs; < 0: removed
  // Billing: prices and plans as set (a newer one of the same key replaces
  // the stored one), ledger entries to append.
  std::vector<billing::Price> prices;
  std::vector<billing::Plan> plans;
  std::vector<billing::LedgerEntry> ledger;
  std::vector<ImageChange> images;  // in order: a later change of a key wins
  std::vector<VolumeChange> volumes;  // in order: a later change of a key wins
  std::vector<SnapshotChange> snapshots;  // likewise
  bool empty() const {
    return jobs.empty() && nodes.empty() && quotas.empty() && prices.empty() && plans.empty() &&
           ledger.empty() && images.empty() && volumes.empty() && snapshots.empty();
  }
};

struct SubmitResult {
  std::string job_id;
  bool duplicate = false;  // the idempotency key had already created it
};

}  // namespace athanor::coord
