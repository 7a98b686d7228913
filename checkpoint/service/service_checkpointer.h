// ServiceCheckpointer: the rank side of the node checkpoint service.
//
// Save(step, state) asks the service for this rank's staging area (waiting,
// or skipping under kSkip, while the previous upload holds it or the node's
// staging budget is full), copies the shard image into it (that copy is the
// training stall), and sends the hand-off. Save does not wait for the
// service's answer to the hand-off: the next call (Save, Wait, in_flight)
// reads it first, so the stall is one round trip (the stage) and the copy.
// Once Wait returns OK the service owns the checkpoint: the rank may exit or
// be killed without losing it (a preempted rank calls Wait before it exits).
// The service uploads it, and the coordinator commits the step once every
// rank's shard is durable; the rank does not wait for either.
//
// The area's mapping is kept between checkpoints (the service passes the same
// area until the rank goes), so later copies touch no new pages.
//
// Threading: one thread at a time (the training loop). Owns its socket and
// mapping.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "checkpoint/checkpoint_writer.h"

namespace athanor {

struct ServiceCheckpointerOptions {
  std::string socket_path;  // $ATHANOR_CHECKPOINT_SERVICE
  std::string job;
  int32_t attempt = 0;
  int rank = 0;
  int world_size = 1;
  InFlightPolicy in_flight = InFlightPolicy::kWait;
  std::string uri;                          // the job's checkpoint URI
  int keep_last = 3;                        // retention the coordinator applies
  std::map<std::string, std::string> env;  // the job's AWS_* credentials
};

class ServiceCheckpointer final : public CheckpointWriter {
 public:
  // Unavailable when the service cannot be reached.
  static absl::StatusOr<std::unique_ptr<ServiceCheckpointer>> Connect(
      ServiceCheckpointerOptions options);
  ~ServiceCheckpointer() override;

  // Errors: InvalidArgument for an invalid state; the service's refusal or a
  // lost connection otherwise (the step is then not checkpointed).
  absl::StatusOr<bool> Save(int64_t step, const TrainingState& state) override;
  absl::Status Wait() override;  // the last hand-off's status
  bool in_flight() const override;  // the service is still uploading our last shard
  CheckpointStats stats() const override;

 private:
  ServiceCheckpointer(ServiceCheckpointerOptions options, int sock)
      : options_(std::move(options)), sock_(sock) {}
  absl::Status MapArea(int fd, uint64_t area, uint64_t capacity);
  // Reads the answer to a hand-off sent by Save, if one is due, into
  // last_status_.
  absl::Status CollectHandoff() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(socket_mu_);

  const ServiceCheckpointerOptions options_;
  const int sock_;
  // The mapped staging area (confined to the training thread).
  uint64_t area_id_ = 0;
  char* map_ = nullptr;
  uint64_t map_size_ = 0;
  mutable absl::Mutex socket_mu_;  // serialises request/reply pairs (in_flight is const)
  mutable absl::Status last_status_ ABSL_GUARDED_BY(socket_mu_);
  mutable bool handoff_due_ ABSL_GUARDED_BY(socket_mu_) = false;  // its answer is unread
  mutable int64_t handoff_step_ ABSL_GUARDED_BY(socket_mu_) = -1;
  CheckpointStats stats_;
};

}  // namespace athanor
