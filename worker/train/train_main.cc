// athanor-train: trains the character-level MLP language model on this rank,
// data-parallel across the ranks named by the env contract (or mpirun, or
// alone). One JSON line per step on stdout from rank 0 (every rank with
// --all-ranks-log); a progress line on stderr when stdout is a terminal.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "collectives/factory.h"
#include "common/logging.h"
#include "common/rank_env.h"
#include "common/status.h"
#include "worker/train/safetensors_writer.h"
#include "worker/train/train_flags.h"
#include "worker/train/trainer.h"

namespace athanor {
namespace {

volatile sig_atomic_t g_stop_signal = 0;

// The first SIGTERM/SIGINT asks for a clean stop at the next step boundary; a
// second one ends the process at once (default action).
void OnStopSignal(int sig) {
  if (g_stop_signal != 0) {
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  g_stop_signal = sig;
}

// Picks the backend and bootstrap for how this process was started.
absl::StatusOr<CommunicatorOptions> CommOptions(const TrainFlags& flags, const RankEnv& env) {
  CommunicatorOptions o;
  o.backend = flags.backend;
  o.rank = env.rank;
  o.world_size = env.world_size;
  o.local_rank = env.local_rank;
  o.master_addr = env.master_addr.empty() ? "127.0.0.1" : env.master_addr;
  o.master_port = env.master_port;
  o.timeout = std::chrono::seconds(flags.timeout_s);
  if (env.world_size > 1 && env.source == RankEnvSource::kOpenMpi && env.master_addr.empty() &&
      o.backend != "mpi") {
    if (flags.backend_given) {
      return absl::FailedPreconditionError(absl::StrCat(
          "started by mpirun without MASTER_ADDR/MASTER_PORT, so the '", o.backend,
          "' backend has no TCP store to bootstrap from: use --backend mpi, or run "
          "`mpirun -np N athanor-run -- athanor-train ...` (athanor-run sets the env contract)"));
    }
    ATHANOR_LOG(INFO) << "started by mpirun without MASTER_ADDR: using the mpi backend";
    o.backend = "mpi";
  }
  if (env.world_size > 1 && o.backend != "mpi" && env.master_port == 0) {
    return absl::FailedPreconditionError(
        "WORLD_SIZE > 1 but MASTER_PORT is not set: start the ranks with athanor-run, the "
        "agent, or mpirun");
  }
  return o;
}

std::string StepJson(const StepStats& s, int rank, bool with_rank) {
  std::string out = "{";
  if (with_rank) absl::StrAppend(&out, "\"rank\":", rank, ",");
  absl::StrAppend(
      &out,
      absl::StrFormat("\"step\":%d,\"loss\":%.9g,\"tokens_per_s\":%.1f,\"loss_scale\":%g,"
                      "\"comm_wait_ms\":%.3f,\"step_ms\":%.3f,\"skipped\":%s,\"grad_bytes\":%d}",
                      s.step, s.loss, s.tokens_per_s, s.loss_scale, s.comm_wait_ms, s.step_ms,
                      s.skipped ? "true" : "false", s.grad_bytes));
  return out;
}

absl::Status Run(TrainFlags flags) {
  ASSIGN_OR_RETURN(RankEnv env, ParseRankEnv(ProcessEnv()));
  SetLogTags(absl::StrCat("rank=", env.rank));
  ASSIGN_OR_RETURN(CommunicatorOptions comm_options, CommOptions(flags, env));
  ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, CreateCommunicator(comm_options));
  ASSIGN_OR_RETURN(TextDataset data, TextDataset::Load(flags.data, flags.trainer.model.context));

  TrainerOptions options = flags.trainer;
  options.inject_overflow_rank =
      flags.inject_overflow_rank < 0 ? env.world_size - 1 : flags.inject_overflow_rank;
  ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer, Trainer::Create(options, &data, comm.get()));
  if (!flags.resume_from.empty()) {
    std::map<std::string, std::vector<float>> tensors;
    std::map<std::string, std::string> meta;
    RETURN_IF_ERROR(ReadSafetensors(flags.resume_from, &tensors, &meta));
    RETURN_IF_ERROR(Annotate(trainer->LoadState(tensors, meta), flags.resume_from));
    if (env.rank == 0) {
      ATHANOR_LOG(INFO) << "resumed from " << flags.resume_from << " at step " << trainer->step();
    }
  }
  if (env.rank == 0) {
    ATHANOR_LOG(INFO) << "training " << trainer->model().num_params() << " parameters on "
                      << env.world_size << " rank(s), backend " << comm->backend() << ", "
                      << PrecisionName(options.precision) << ", global batch "
                      << env.world_size * options.micro_batch * options.accum;
  }
  // SIGTERM/SIGINT only set a flag; the ranks agree at the next step boundary.
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = OnStopSignal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  const bool print = env.rank == 0 || flags.all_ranks_log;
  const bool progress = env.rank == 0 && isatty(STDOUT_FILENO);
  for (int64_t i = trainer->step(); i < flags.steps; ++i) {
    absl::StatusOr<StepStats> stats = trainer->Step(g_stop_signal != 0);
    if (!stats.ok()) {
      comm->Abort();
      return Annotate(stats.status(), absl::StrCat("step ", i));
    }
    if (print) std::cout << StepJson(*stats, env.rank, flags.all_ranks_log) << std::endl;
    if (progress) {
      std::cerr << absl::StrFormat("\rstep %d/%d loss %.4f %.0f tok/s", i + 1, flags.steps,
                                   stats->loss, stats->tokens_per_s)
                << (i + 1 == flags.steps ? "\n" : "") << std::flush;
    }
    if (stats->stop) {
      // DESIGN.md preemption: the ranks agreed on this step; a checkpoint goes here.
      ATHANOR_LOG(INFO) << "stopping after step " << stats->step << " as requested ("
                        << (g_stop_signal ? strsignal(g_stop_signal) : "by another rank") << ")";
      break;
    }
  }
  if (!flags.save_state.empty() && env.rank == 0) {
    RETURN_IF_ERROR(
        WriteSafetensors(flags.save_state, trainer->StateTensors(), trainer->StateMetadata()));
  }
  if (!flags.dump_weights.empty() && env.rank == 0) {
    std::map<std::string, std::string> meta = trainer->StateMetadata();
    RETURN_IF_ERROR(WriteSafetensors(
        flags.dump_weights, NamedViews(trainer->model().layout(), trainer->params().data()), meta));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace athanor

int main(int argc, char** argv) {
  athanor::TrainFlags flags;
  absl::Status s = athanor::ParseTrainFlags(argc, argv, &flags);
  if (!s.ok()) {
    std::cerr << "athanor-train: " << s.message() << std::endl;
    return 2;
  }
  if (flags.help) return 0;
  athanor::LogLevel level;
  if (athanor::ParseLogLevel(flags.log_level, &level)) athanor::SetMinLogLevel(level);
  s = athanor::Run(std::move(flags));
  if (!s.ok()) {
    ATHANOR_LOG(ERROR) << "athanor-train failed: " << s.ToString();
    return 1;
  }
  return 0;
}
