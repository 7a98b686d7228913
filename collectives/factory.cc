#include "collectives/factory.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "collectives/local_communicator.h"
#include "collectives/mpi/mpi_communicator.h"
#include "collectives/ucx/ucx_communicator.h"
#ifdef ATHANOR_HAVE_CUDA
#include "collectives/nccl/nccl_communicator.h"
#endif

namespace athanor {

std::vector<std::string> AvailableBackends() {
#ifdef ATHANOR_HAVE_CUDA
  return {"ucx", "mpi", "nccl"};
#else
  return {"ucx", "mpi"};
#endif
}

absl::StatusOr<std::unique_ptr<Communicator>> CreateCommunicator(
    const CommunicatorOptions& options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", options.rank, " / world size ",
                                                   options.world_size, " is not valid"));
  }
  if (options.backend == "nccl") {
#ifdef ATHANOR_HAVE_CUDA
    return CreateNcclCommunicator(options);
#else
    return absl::InvalidArgumentError("backend 'nccl' is not built (no CUDA/NCCL at build time)");
#endif
  }
  if (options.backend != "ucx" && options.backend != "mpi") {
    return absl::InvalidArgumentError(absl::StrCat("unknown collectives backend '",
                                                   options.backend, "'; built: ",
                                                   absl::StrJoin(AvailableBackends(), ", ")));
  }
  if (options.world_size == 1) {
    return std::unique_ptr<Communicator>(std::make_unique<LocalCommunicator>(options.backend));
  }
  if (options.backend == "mpi") return CreateMpiCommunicator(options);
  return CreateUcxCommunicator(options);
}

}  // namespace athanor
