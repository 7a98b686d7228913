// athanor-run under mpirun: turns OMPI_COMM_WORLD_* into the env contract
// and execs the command in place (one rank per mpirun process).
//
// Rank 0 picks its address (first non-loopback IPv4, else 127.0.0.1) and a
// free port; MPI_Bcast shares them; MPI is finalised before exec so the
// command starts clean. Call from main, single-threaded.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace athanor {

// True when this process was started by Open MPI's mpirun.
bool StartedByMpirun();

// Does not return on success (execvp). Errors: MPI failures (Internal),
// a command that cannot be executed (NotFound / PermissionDenied).
absl::Status ExecWithMpiContract(const std::vector<std::string>& command,
                                 const std::string& job_id);

}  // namespace athanor
