#include "launcher/run/mpi_env.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>
#include <net/if.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/net.h"
#include "common/rank_env.h"
#include "common/status.h"

namespace athanor {
namespace {

std::string PrimaryAddress() {
  ifaddrs* list = nullptr;
  std::string found = "127.0.0.1";
  if (getifaddrs(&list) != 0) return found;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    if ((a->ifa_flags & IFF_LOOPBACK) || !(a->ifa_flags & IFF_UP)) continue;
    char buf[INET_ADDRSTRLEN];
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if (inet_ntop(AF_INET, &in->sin_addr, buf, sizeof(buf)) != nullptr) {
      found = buf;
      break;
    }
  }
  freeifaddrs(list);
  return found;
}

absl::Status MpiError(int rc, const char* what) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  return absl::InternalError(absl::StrCat(what, ": ", std::string(msg, len)));
}

}  // namespace

bool StartedByMpirun() { return std::getenv("OMPI_COMM_WORLD_RANK") != nullptr; }

absl::Status ExecWithMpiContract(const std::vector<std::string>& command,
                                 const std::string& job_id) {
  if (command.empty()) return absl::InvalidArgumentError("no command after --");
  ASSIGN_OR_RETURN(RankEnv env, ParseRankEnv(ProcessEnv()));
  int rc = MPI_Init(nullptr, nullptr);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Init");
  struct {
    char addr[64];
    int port;
  } master;
  std::memset(&master, 0, sizeof(master));
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    const std::string addr = PrimaryAddress();
    std::strncpy(master.addr, addr.c_str(), sizeof(master.addr) - 1);
    absl::StatusOr<int> port = PickFreePort(addr);
    if (!port.ok()) port = PickFreePort("127.0.0.1");
    master.port = port.ok() ? *port : -1;
  }
  rc = MPI_Bcast(&master, sizeof(master), MPI_BYTE, 0, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Bcast");
  MPI_Finalize();
  if (master.port <= 0) return absl::UnavailableError("rank 0 found no free port");

  env.rank = rank;
  env.master_addr = master.addr;
  env.master_port = master.port;
  if (env.job_id.empty()) env.job_id = job_id;
  for (const auto& [name, value] : env.ToEnvironment()) {
    if (value.empty() && (name == "CUDA_VISIBLE_DEVICES" || name == "ATHANOR_CHECKPOINT_URI" ||
                          name == "ATHANOR_COORDINATOR")) {
      continue;
    }
    setenv(name.c_str(), value.c_str(), 1);
  }
  std::vector<char*> argv;
  for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  return ErrnoStatus(absl::StrCat("exec ", command[0]));
}

}  // namespace athanor
