// TelemetryHub: the agent's end of the training telemetry side channel.
//
// For each job attempt it runs ranks of, the agent listens on a unix
// datagram socket WORK_DIR/jobs/<job>/telemetry/attempt-<a>.sock, named to
// the ranks as ATHANOR_TELEMETRY_SOCKET (the sandbox binds the folder in and
// gives it to the tenant's uid, mode 0700, so no other job can reach it).
// Each datagram is one JSON object (docs/observability.md), e.g.
//   {"rank":0,"step":12,"loss":3.91,"tokens_per_s":5120,"step_ms":80.1,
//    "comm_wait_ms":9.5,"loss_scale":65536,"skipped":false,"ckpt_stall_ms":0}
// (plus "ckpt_step", "ckpt_bytes" and "ckpt_upload_ms" once per finished checkpoint)
// exactly the line athanor-train prints per step; any program may send it.
// "step" and "loss" are required; a message over 4 KiB, not JSON, or with a
// field of the wrong type is dropped and counted.
//
// Per attempt the hub keeps rank 0's samples until Take() (at most 64: when
// full, every other is dropped), which ranks reported, and rank 0's count of
// skipped steps.
//
// Thread model: one receiver thread owned by the hub; every public method is
// thread-safe (one mutex, never held across a blocking call).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "worker/agent/checkpoint_counters.h"

namespace athanor::agent {

struct StepSample {
  int64_t step = 0;
  double loss = 0;
  double tokens_per_s = 0;
  double step_ms = 0;
  double comm_wait_share = 0;  // 0..1
  double loss_scale = 0;
  int64_t skipped_steps = 0;   // so far this attempt
  double ckpt_stall_ms = 0;
  int64_t total_steps = 0;     // the run's planned steps (0: not said)
  int64_t unix_ms = 0;         // when the agent received it
  // A checkpoint the rank is done with, told once (absent: -1): its step, its
  // shard's bytes, and the upload's time where the rank uploaded it itself.
  int64_t ckpt_step = -1;
  double ckpt_bytes = -1;
  double ckpt_upload_ms = -1;
};

struct JobSamples {
  std::string job_id;
  int32_t attempt = 0;
  std::vector<StepSample> samples;  // rank 0's, oldest first
  int32_t ranks_reporting = 0;      // distinct ranks heard from since the last Take
};

class TelemetryHub {
 public:
  static constexpr size_t kMaxMessage = 4096;
  static constexpr size_t kMaxPending = 64;

  // Starts the receiver thread. `work_dir` is the agent's.
  explicit TelemetryHub(std::string work_dir);
  ~TelemetryHub();  // stops the thread, removes every socket

  // The attempt's socket path, bound on first use (InvalidArgument for a job
  // id that is not a safe file name; Internal naming the syscall).
  absl::StatusOr<std::string> SocketFor(const std::string& job_id, int32_t attempt);
  // Closes and removes the sockets of attempts not in `keep` (job, attempt).
  void Retain(const std::set<std::pair<std::string, int32_t>>& keep);
  // Samples received since the last call, per attempt that has any.
  std::vector<JobSamples> Take();
  // The newest rank-0 sample per (job, attempt), for the agent's /metrics.
  std::map<std::pair<std::string, int32_t>, StepSample> Latest() const;
  uint64_t dropped() const { return dropped_.load(); }
  // Checkpoints that ranks uploaded themselves, as told (each rank's step
  // counted once per attempt), since the hub started: only grows.
  UploadFigures rank_uploads() const;

  // Parses one message; false (with `why`) when it is not a valid sample.
  static bool Parse(const char* data, size_t size, int32_t* rank, StepSample* out, bool* skipped,
                    std::string* why);

 private:
  struct Channel {
    int fd = -1;
    std::string path;
    std::vector<StepSample> pending;
    std::set<int32_t> ranks;
    int64_t skipped = 0;
    bool has_latest = false;
    StepSample latest;
    std::map<int32_t, int64_t> ckpt_told;  // rank -> newest checkpoint step counted
  };
  static constexpr size_t kMaxCheckpointRanks = 4096;  // per attempt
  void Loop();
  void Receive(const std::pair<std::string, int32_t>& key, int fd);

  const std::string work_dir_;
  int wake_[2] = {-1, -1};  // self-pipe: the channel set changed, or stop
  std::atomic<uint64_t> dropped_{0};
  mutable absl::Mutex mu_;
  std::map<std::pair<std::string, int32_t>, Channel> channels_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  UploadFigures rank_uploads_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace athanor::agent
