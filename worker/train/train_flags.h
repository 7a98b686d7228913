// athanor-train's command line, parsed once into typed options.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "worker/train/trainer.h"

namespace athanor {

struct TrainFlags {
  TrainerOptions trainer;
  std::string data = "synthetic:1000000";
  std::string backend = "ucx";
  bool backend_given = false;  // --backend was on the command line
  int64_t steps = 100;
  // > 0: samples per step over all ranks, whatever the world size
  // (common/elastic_batch.h); micro-batch and accumulation follow from it.
  int64_t global_batch = 0;
  std::string dump_weights;  // empty: no dump
  std::string save_state;    // rank 0 writes weights + optimizer state + metadata at the end
  std::string resume_from;   // a --save-state file to start from
  std::string checkpoint_uri;  // empty: no checkpoints ($ATHANOR_CHECKPOINT_URI)
  int64_t checkpoint_every = 0;  // 0: only at the end and on SIGTERM
  std::string job_id = "local";  // $ATHANOR_JOB_ID
  int keep = 3;
  // The node checkpoint service's socket ($ATHANOR_CHECKPOINT_SERVICE, set
  // by an agent that runs one): empty uploads in the rank.
  std::string checkpoint_service;
  bool checkpoint_skip = false;  // --checkpoint-policy skip (else wait)
  bool all_ranks_log = false;
  int inject_overflow_rank = -1;  // -1: the last rank
  std::string inject_slow;        // RANK:FROM:TO:FACTOR (inject_slow.h); empty: off
  int timeout_s = 120;
  std::string log_level = "info";
  bool help = false;
};

// InvalidArgument naming the flag for bad or out-of-range values.
absl::Status ParseTrainFlags(int argc, const char* const* argv, TrainFlags* flags);

}  // namespace athanor
