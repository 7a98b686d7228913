// athanor-collectives-rank: one rank of a collectives check, started with the
// env contract (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) by
// whatever places ranks: tests/cross_host starts them in separate network
// namespaces to stand for separate hosts.
//
//   athanor-collectives-rank [--backend ucx]
//       runs the conformance suite and concurrent tagged all-reduces; prints
//       "rank R: conformance ok" and exits 0, or the error and exits 1.
//   athanor-collectives-rank --die-rank D
//       after one 16 MiB all-reduce rank D SIGKILLs itself; every other rank
//       keeps all-reducing (20 s deadline each) and prints
//       "rank R: <status>"; it exits 0 when that status is Unavailable and
//       names rank D, else 1. Survivors leave only once every survivor has
//       reported (counted in the bootstrap store that rank 0 serves), so one
//       survivor's exit cannot be taken by the others for the death.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives/bootstrap/tcp_store.h"
#include "collectives/factory.h"
#include "collectives/testing/conformance.h"
#include "collectives/ucx/ucx_tuning_env.h"
#include "common/logging.h"
#include "common/options.h"
#include "common/rank_env.h"

namespace athanor {
namespace {

int Run(const std::string& backend, int die_rank) {
  auto env = ParseRankEnv(ProcessEnv());
  if (!env.ok()) {
    fprintf(stderr, "athanor-collectives-rank: %s\n", env.status().ToString().c_str());
    return 2;
  }
  CommunicatorOptions co;
  co.backend = backend;
  co.rank = env->rank;
  co.world_size = env->world_size;
  co.local_rank = env->local_rank;
  co.master_addr = env->master_addr.empty() ? "127.0.0.1" : env->master_addr;
  co.master_port = env->master_port;
  co.timeout = std::chrono::seconds(60);
  auto tuning = UcxTuningFromEnv(ProcessEnv());
  if (!tuning.ok()) {
    fprintf(stderr, "athanor-collectives-rank: %s\n", tuning.status().ToString().c_str());
    return 2;
  }
  co.ucx = *tuning;
  auto rendezvous = ParseRendezvousEnv(ProcessEnv());
  if (!rendezvous.ok()) {
    fprintf(stderr, "athanor-collectives-rank: %s\n", rendezvous.status().ToString().c_str());
    return 2;
  }
  co.rendezvous_secret = rendezvous->secret;
  co.rendezvous_listen_fd = rendezvous->listen_fd;
  SetLogTags(absl::StrCat("rank=", co.rank));
  auto comm = CreateCommunicator(co);
  if (!comm.ok()) {
    printf("rank %d: %s\n", co.rank, comm.status().ToString().c_str());
    return 1;
  }
  Communicator* c = comm->get();
  if (die_rank < 0) {
    absl::Status s = RunConformance(c);
    if (s.ok()) s = RunConcurrentTags(c);
    printf("rank %d: %s\n", co.rank, s.ok() ? "conformance ok" : s.ToString().c_str());
    fflush(stdout);
    return s.ok() ? 0 : 1;
  }
  std::vector<float> buf(4 << 20, 1.0f);
  absl::Status s = c->AllReduce(buf.data(), buf.data(), buf.size(), DataType::kF32, ReduceOp::kSum);
  if (s.ok() && co.rank == die_rank) {
    fflush(stdout);
    kill(getpid(), SIGKILL);
  }
  CollectiveOptions o;
  o.timeout = std::chrono::seconds(20);
  for (int i = 0; i < 100 && s.ok(); ++i) {
    s = c->AllReduce(buf.data(), buf.data(), buf.size(), DataType::kF32, ReduceOp::kSum, o);
  }
  printf("rank %d: %s\n", co.rank, s.ToString().c_str());
  fflush(stdout);
  if (co.rank != die_rank) {
    auto store = TcpStoreClient::Connect(co.master_addr, co.master_port, std::chrono::seconds(10),
                                         co.rendezvous_secret);
    if (store.ok()) {
      auto n = (*store)->Add("die/reported", 1);
      if (n.ok() && *n == co.world_size - 1) (void)(*store)->Set("die/all", "1");
      // Bounded: a survivor that never reports fails its own check anyway.
      (void)(*store)->Get("die/all", std::chrono::seconds(30));
    }
  }
  const bool named = absl::IsUnavailable(s) &&
                     s.message().find(absl::StrCat("rank ", die_rank)) != absl::string_view::npos;
  // The communicator's destructor waits for peers that are gone: skip it.
  _exit(named ? 0 : 1);
}

}  // namespace
}  // namespace athanor

int main(int argc, char** argv) {
  namespace po = boost::program_options;
  std::string backend = "ucx";
  int die_rank = -1;
  po::options_description desc("athanor-collectives-rank options");
  desc.add_options()
      ("backend", po::value(&backend)->default_value(backend), "ucx | mpi | nccl")
      ("die-rank", po::value(&die_rank)->default_value(die_rank),
       "this rank SIGKILLs itself after one all-reduce; the others must name it");
  athanor::ParsedCommandLine cmd;
  absl::Status s = athanor::ParseOptions(
      argc, argv, desc,
      "usage: RANK=R WORLD_SIZE=N MASTER_ADDR=A MASTER_PORT=P athanor-collectives-rank "
      "[--die-rank D]\nOne rank of a collectives check (conformance, or a killed peer).",
      &cmd);
  if (!s.ok()) {
    fprintf(stderr, "athanor-collectives-rank: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  if (cmd.help) return 0;
  return athanor::Run(backend, die_rank);
}
