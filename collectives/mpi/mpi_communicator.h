// The mpi backend: Open MPI's collectives behind the Communicator interface;
// the reference the other backends are checked and benchmarked against.
//
// Needs the process to be started by mpirun (OMPI_COMM_WORLD_* / PMIX_RANK in
// the environment); otherwise creation fails with FailedPrecondition saying
// so: it does not use the TCP store. MPI is initialised on first use (thread
// level: whatever Open MPI grants; calls are serialised with a mutex) and
// finalised at exit. f16/bf16 use a user-defined MPI_Op that widens to f32;
// kAvg is a sum followed by a local division.
//
// Threading: thread-safe. Unlike ucx, MPI matches collectives by issue order,
// not by tag: every rank must issue concurrent async calls in the same order.
// Errors: MPI errors come back as Internal with MPI's message; a timeout is
// DeadlineExceeded. A dead rank usually makes mpirun end the whole job.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "collectives/factory.h"

namespace athanor {

absl::StatusOr<std::unique_ptr<Communicator>> CreateMpiCommunicator(
    const CommunicatorOptions& options);

// True when this process looks like it was started by mpirun / a PMIx launcher.
bool StartedByMpirun();

}  // namespace athanor
