// The nccl backend: collectives on device memory through NCCL.
//
// Built when CUDA and NCCL are found (ATHANOR_HAVE_CUDA). Every buffer passed
// to it must be device memory on this rank's GPU (device local_rank % count).
// Bootstrap: rank 0 serves the TCP store and publishes ncclGetUniqueId there;
// the communicator is created non-blocking (ncclConfig_t.blocking = 0) and
// its initialisation polled under our own deadline (ncclCommAbort on timeout).
//
// Threading: thread-safe (a mutex serialises enqueues). NCCL matches calls by
// issue order, not by tag: every rank must issue concurrent async calls in the
// same order. Work completion is a CUDA event on the communicator's stream.
// Errors: FailedPrecondition when there is no CUDA device; Internal with
// NCCL's message; DeadlineExceeded (after ncclCommAbort) past the timeout.
// Abort: the communicator is aborted once (on Abort(), a timeout or a failed
// initialisation) and never used again: later calls answer Aborted and the
// destructor does not destroy it a second time. Abort() from another thread
// interrupts an enqueue that is waiting on NCCL (ncclInProgress).
#pragma once

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "collectives/factory.h"

namespace athanor {

// Test hooks.
struct NcclTuning {
  // Called (holding the communicator's lock) when an enqueue starts waiting
  // on an ncclInProgress call.
  std::function<void()> on_enqueue_wait;
};

absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(
    const CommunicatorOptions& options, NcclTuning tuning = {});

// Number of visible CUDA devices (0 on error or when there is none).
int CudaDeviceCount();

}  // namespace athanor
