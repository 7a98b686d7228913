// athanor-train: trains the character-level MLP language model on this rank,
// data-parallel across the ranks named by the env contract (or mpirun, or
// alone). Rank 0 (every rank with --all-ranks-log) prints one JSON line per
// step on stdout when stdout is a file or a pipe, for scripts; when rank 0's
// stdout is a terminal it shows a progress line and a summary instead
// (ConsoleProgress).
//
// With --checkpoint-uri (or $ATHANOR_CHECKPOINT_URI) it resumes from the job's
// newest valid committed checkpoint, checkpoints asynchronously every
// --checkpoint-every steps and at the end, and on SIGTERM/SIGINT checkpoints
// the step the ranks agreed to stop after, prints it and exits 0. Formats and
// output lines: docs/formats.md.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "checkpoint/builtin_stores.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/retention.h"
#include "checkpoint/s3/s3_options.h"
#include "common/elastic_batch.h"
#include "checkpoint/service/service_checkpointer.h"
#include "collectives/factory.h"
#include "collectives/progress_communicator.h"
#include "collectives/ucx/ucx_tuning_env.h"
#include "common/logging.h"
#include "common/progress_page.h"
#include "common/rank_env.h"
#include "common/status.h"
#include "worker/train/telemetry_client.h"
#include "worker/train/checkpointing.h"
#include "worker/train/console_progress.h"
#include "worker/train/inject_skip.h"
#include "worker/train/inject_slow.h"
#include "worker/train/state_file.h"
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
  ASSIGN_OR_RETURN(o.ucx, UcxTuningFromEnv(ProcessEnv()));
  ASSIGN_OR_RETURN(RendezvousEnv rendezvous, ParseRendezvousEnv(ProcessEnv()));
  o.rendezvous_secret = rendezvous.secret;
  o.rendezvous_listen_fd = rendezvous.listen_fd;
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

std::string StepJson(const StepStats& s, int rank, bool with_rank, double ckpt_stall_ms) {
  std::string out = "{";
  if (with_rank) absl::StrAppend(&out, "\"rank\":", rank, ",");
  absl::StrAppend(
      &out,
      absl::StrFormat("\"step\":%d,\"loss\":%.9g,\"tokens_per_s\":%.1f,\"loss_scale\":%g,"
                      "\"comm_wait_ms\":%.3f,\"step_ms\":%.3f,\"skipped\":%s,\"grad_bytes\":%d,"
                      "\"ckpt_stall_ms\":%.3f}",
                      s.step, s.loss, s.tokens_per_s, s.loss_scale, s.comm_wait_ms, s.step_ms,
                      s.skipped ? "true" : "false", s.grad_bytes, ckpt_stall_ms));
  return out;
}

using SteadyClock = std::chrono::steady_clock;

double MsSince(SteadyClock::time_point t0) {
  return std::chrono::duration<double, std::milli>(SteadyClock::now() - t0).count();
}

// The checkpoint side of a run: the store, the barriers and the Checkpointer.
// Save decisions are made identically on every rank (same steps; under
// --checkpoint-policy skip, an all-reduce of "still in flight"), so every rank
// makes the same sequence of commit votes.
struct CheckpointSession {
  std::unique_ptr<ObjectStore> store;
  std::unique_ptr<CommunicatorCommitBarrier> commit_barrier;
  std::unique_ptr<CheckpointWriter> checkpointer;
  bool through_service = false;
  int64_t last_saved = -1;  // the newest step staged (or restored)
  int64_t last_told = -1;   // the newest saved step told to the agent's telemetry

  // Stages `step`; returns the training stall in ms.
  absl::StatusOr<double> Save(const Trainer& trainer, int64_t step, const CrashPlan& plan) {
    auto t0 = SteadyClock::now();
    MaybeCrash(plan, CrashPoint::kSnapshot, step, trainer.rank());
    ASSIGN_OR_RETURN(bool staged, checkpointer->Save(step, TrainerCheckpointState(trainer)));
    if (staged) last_saved = step;
    return MsSince(t0);
  }
  // Saves `step` unless it already was, and waits for its commit decision.
  absl::Status SaveAndWait(const Trainer& trainer, int64_t step, const CrashPlan& plan) {
    if (last_saved != step) {
      RETURN_IF_ERROR(Save(trainer, step, plan).status());
    }
    return Annotate(checkpointer->Wait(), absl::StrCat("checkpoint of step ", step));
  }
};

// Median of 5 copies of the trainer's state into one buffer: the floor for
// ckpt_stall_ms.
double MemcpyBaselineMs(const Trainer& trainer, size_t* bytes) {
  std::vector<NamedTensor> tensors = trainer.StateTensors();
  *bytes = 0;
  for (const NamedTensor& t : tensors) *bytes += t.size * sizeof(float);
  std::vector<char> buffer(*bytes);
  std::vector<double> ms;
  for (int i = 0; i < 5; ++i) {
    auto t0 = SteadyClock::now();
    size_t off = 0;
    for (const NamedTensor& t : tensors) {
      std::memcpy(buffer.data() + off, t.data, t.size * sizeof(float));
      off += t.size * sizeof(float);
    }
    ms.push_back(MsSince(t0));
  }
  std::sort(ms.begin(), ms.end());
  return ms[2];
}

absl::Status Run(TrainFlags flags) {
  // SIGTERM/SIGINT only set a flag (from the start, so one that arrives while
  // restoring is not lost); the ranks agree at the next step boundary.
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = OnStopSignal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  // The environment is read here, once; what is below takes values.
  const EnvLookup process_env = ProcessEnv();
  ASSIGN_OR_RETURN(RankEnv env, ParseRankEnv(process_env));
  // The agent's telemetry socket and progress page (absent under mpirun /
  // athanor-run).
  TelemetryClient telemetry(process_env("ATHANOR_TELEMETRY_SOCKET").value_or(""));
  const std::string progress_file = process_env("ATHANOR_PROGRESS_FILE").value_or("");
  SetLogTags(absl::StrCat("rank=", env.rank));
  ASSIGN_OR_RETURN(CrashPlan crash, CrashPlanFromEnv(process_env));
  ASSIGN_OR_RETURN(SlowPlan slow, ParseSlowPlan(flags.inject_slow));
  ASSIGN_OR_RETURN(SkipPlan skip, SkipPlanFromEnv(process_env));
  StartCrashTimer(crash, env.rank);
  ASSIGN_OR_RETURN(CommunicatorOptions comm_options, CommOptions(flags, env));
  ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, CreateCommunicator(comm_options));
  ASSIGN_OR_RETURN(TextDataset data, TextDataset::Load(flags.data, flags.trainer.model.context));

  TrainerOptions options = flags.trainer;
  if (flags.global_batch > 0) {
    absl::StatusOr<BatchShape> shape = FitGlobalBatch(flags.global_batch, env.world_size, options.micro_batch);
    if (!shape.ok()) return Annotate(shape.status(), "--global-batch");
    if (env.rank == 0 && (shape->micro_batch != options.micro_batch || shape->accum != options.accum)) {
      std::cerr << "global batch " << flags.global_batch << " on " << env.world_size << " rank(s): micro-batch "
                << shape->micro_batch << " x accumulation " << shape->accum << std::endl;
    }
    options.micro_batch = shape->micro_batch;
    options.accum = shape->accum;
  }
  options.inject_overflow_rank =
      flags.inject_overflow_rank < 0 ? env.world_size - 1 : flags.inject_overflow_rank;
  // Under an agent, the training loop's progress goes on the page it names
  // ($ATHANOR_PROGRESS_FILE); the checkpoint barriers stay off it.
  // The test hook that skips an all-reduce sits under the page, so the
  // skipped call still takes its issue number there.
  Communicator* train_comm = comm.get();
  std::unique_ptr<SkipAllReduceCommunicator> skip_comm;
  if (skip.AppliesTo(env.rank, env.attempt)) {
    skip_comm = std::make_unique<SkipAllReduceCommunicator>(train_comm, skip);
    train_comm = skip_comm.get();
  }
  absl::StatusOr<std::unique_ptr<ProgressWriter>> page = ProgressWriter::OpenIfNamed(progress_file);
  if (!page.ok()) return Annotate(page.status(), "ATHANOR_PROGRESS_FILE");
  std::unique_ptr<ProgressWriter> progress_page = std::move(*page);
  std::unique_ptr<ProgressCommunicator> progress_comm;
  if (progress_page != nullptr) {
    progress_comm = std::make_unique<ProgressCommunicator>(train_comm, progress_page.get());
    train_comm = progress_comm.get();
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer, Trainer::Create(options, &data, train_comm));
  const std::chrono::milliseconds timeout = std::chrono::seconds(flags.timeout_s);
  if (!flags.resume_from.empty()) {
    std::map<std::string, std::vector<float>> tensors;
    std::map<std::string, std::string> meta;
    RETURN_IF_ERROR(ReadSafetensors(flags.resume_from, &tensors, &meta));
    RETURN_IF_ERROR(Annotate(trainer->LoadState(tensors, meta), flags.resume_from));
    if (env.rank == 0) {
      ATHANOR_LOG(INFO) << "resumed from " << flags.resume_from << " at step " << trainer->step();
    }
  }
  std::optional<CheckpointSession> ckpt;
  if (!flags.checkpoint_uri.empty()) {
    RegisterBuiltinObjectStores();
    ckpt.emplace();
    ASSIGN_OR_RETURN(ckpt->store, OpenObjectStore(flags.checkpoint_uri));
    ckpt->store = WrapForCrashes(std::move(ckpt->store), crash, flags.job_id, env.rank,
                                 env.world_size);
    if (flags.resume_from.empty()) {
      CommunicatorCommitBarrier agreement(comm.get(), kCheckpointRestoreTag, timeout);
      ASSIGN_OR_RETURN(std::optional<RestoreResult> restored,
                       RestoreTrainer(ckpt->store.get(), flags.job_id, &agreement, trainer.get()));
      if (restored.has_value()) {
        ckpt->last_saved = restored->step;
        ckpt->last_told = restored->step;  // restored, not saved
        if (env.rank == 0 && !restored->rejected.empty()) {
          RETURN_IF_ERROR(DecommitNewerSteps(ckpt->store.get(), flags.job_id, restored->step));
        }
        if (env.rank == 0) {
          std::cerr << "resuming from step " << restored->step << " of " << flags.checkpoint_uri
                    << "/" << flags.job_id << " (written by " << restored->source_world_size
                    << " rank(s))" << std::endl;
          std::cout << "{\"event\":\"resume\",\"step\":" << restored->step
                    << ",\"source_world_size\":" << restored->source_world_size << "}"
                    << std::endl;
        }
      }
    }
    if (!flags.checkpoint_service.empty()) {
      // Under an agent: the node's service uploads, the coordinator commits.
      ServiceCheckpointerOptions so;
      so.socket_path = flags.checkpoint_service;
      so.job = flags.job_id;
      so.attempt = env.attempt;
      so.rank = env.rank;
      so.world_size = env.world_size;
      so.in_flight = InFlightPolicy::kWait;  // skips are decided collectively, below
      so.uri = flags.checkpoint_uri;
      so.keep_last = flags.keep;
      so.env = AwsEnvironment();
      ASSIGN_OR_RETURN(ckpt->checkpointer, ServiceCheckpointer::Connect(std::move(so)));
      ckpt->through_service = true;
    } else {
      ckpt->commit_barrier =
          std::make_unique<CommunicatorCommitBarrier>(comm.get(), kCheckpointCommitTag, timeout);
      CheckpointerOptions co;
      co.job = flags.job_id;
      co.rank = env.rank;
      co.world_size = env.world_size;
      co.in_flight = InFlightPolicy::kWait;  // skips are decided collectively, below
      co.retention.keep_last = flags.keep;
      ckpt->checkpointer =
          std::make_unique<Checkpointer>(ckpt->store.get(), ckpt->commit_barrier.get(), co);
    }
    RetentionOptions retention;
    retention.keep_last = flags.keep;
    if (env.rank == 0) {
      // A run killed between a commit and its retention pass left that pass
      // undone; one at start catches up (it touches only steps older than the
      // newest commit, never one this run writes).
      if (absl::StatusOr<RetentionReport> kept =
              ApplyRetention(ckpt->store.get(), flags.job_id, retention);
          !kept.ok()) {
        ATHANOR_LOG(WARNING) << "retention for " << flags.job_id << " at start failed: "
                             << kept.status().ToString();
      }
      size_t bytes = 0;
      double ms = MemcpyBaselineMs(*trainer, &bytes);
      std::cout << absl::StrFormat(
                       "{\"event\":\"checkpoint_baseline\",\"state_bytes\":%d,\"memcpy_ms\":%.3f}",
                       bytes, ms)
                << std::endl;
    }
  }
  if (env.rank == 0) {
    ATHANOR_LOG(INFO) << "training " << trainer->model().num_params() << " parameters on "
                      << env.world_size << " rank(s), backend " << comm->backend() << ", "
                      << PrecisionName(options.precision) << ", global batch "
                      << env.world_size * options.micro_batch * options.accum << ", "
                      << options.optimizer.kind << " lr " << options.optimizer.lr
                      << ", clip-grad-norm " << options.clip_grad_norm;
  }
  // A person at rank 0's terminal gets a progress line; files and pipes get JSON.
  std::optional<ConsoleProgress> console;
  if (env.rank == 0 && isatty(STDOUT_FILENO)) {
    console.emplace(&std::cout, trainer->step(), flags.steps,
                    int64_t{env.world_size} * options.micro_batch * options.accum,
                    SteadyClock::now());
  }
  const bool print = !console.has_value() && (env.rank == 0 || flags.all_ranks_log);
  bool stopped = false;
  double last_compute_ms = 0;
  double smoothed_compute_ms = -1;  // < 0: no step yet
  for (int64_t i = trainer->step(); i < flags.steps; ++i) {
    double slept_ms = 0;
    if (slow.Applies(env.rank, i, env.attempt) && last_compute_ms > 0) {
      slept_ms = (slow.factor - 1) * last_compute_ms;
      usleep(static_cast<useconds_t>(slept_ms * 1000));
    }
    if (skip_comm != nullptr) skip_comm->SetStep(i);
    absl::StatusOr<StepStats> stats = trainer->Step(g_stop_signal != 0);
    if (!stats.ok()) {
      if (console.has_value()) console->Break();  // the error is logged below it
      comm->Abort();
      return Annotate(stats.status(), absl::StrCat("step ", i));
    }
    const int64_t done = trainer->step();
    // Compute: the step's wall time less every collective wait in it (the
    // gradient buckets' and the loss's), as the page measured them.
    const double waited_ms =
        progress_page != nullptr ? progress_page->TakeWaitMs() : stats->comm_wait_ms;
    last_compute_ms = std::max(0.0, stats->step_ms - waited_ms);
    // Published smoothed (about the last 20 steps): which rank of a gang waits
    // for the other flips from step to step, so one step's compute is noise.
    const double compute_ms = last_compute_ms + slept_ms;
    smoothed_compute_ms = smoothed_compute_ms < 0
                              ? compute_ms
                              : smoothed_compute_ms + 0.05 * (compute_ms - smoothed_compute_ms);
    if (progress_page != nullptr) {
      progress_page->StepDone(done, smoothed_compute_ms, stats->step_ms + slept_ms);
    }
    double stall_ms = 0;
    if (ckpt.has_value() && !stats->stop && flags.checkpoint_every > 0 &&
        done % flags.checkpoint_every == 0 && done < flags.steps) {
      bool skip = false;
      if (flags.checkpoint_skip) {
        ASSIGN_OR_RETURN(skip, AnyRank(comm.get(), ckpt->checkpointer->in_flight(),
                                       kCheckpointSkipTag, timeout));
      }
      if (!skip) {
        // Blocks while an earlier save is in flight, whose commit may wait
        // on a peer: shown on the page, so a hang report can say so.
        ProgressBlockedScope saving(progress_page.get(), ProgressOp::kCheckpointSave);
        ASSIGN_OR_RETURN(stall_ms, ckpt->Save(*trainer, done, crash));
      }
    }
    if (print) std::cout << StepJson(*stats, env.rank, flags.all_ranks_log, stall_ms) << std::endl;
    if (telemetry.enabled()) {
      std::string message = StepJson(*stats, env.rank, true, stall_ms);
      message.insert(message.size() - 1, absl::StrCat(",\"total_steps\":", flags.steps));
      // A checkpoint this rank uploaded itself is told once, when its upload
      // is done: its shard's bytes and the upload's time. (The node's
      // checkpoint service counts the uploads it does.)
      if (ckpt.has_value() && !ckpt->through_service && ckpt->last_saved > ckpt->last_told &&
          !ckpt->checkpointer->in_flight()) {
        const CheckpointStats cs = ckpt->checkpointer->stats();
        message.insert(message.size() - 1,
                       absl::StrFormat(",\"ckpt_step\":%d,\"ckpt_bytes\":%d,\"ckpt_upload_ms\":%.3f",
                                       ckpt->last_saved, cs.shard_bytes, cs.upload_seconds * 1e3));
        ckpt->last_told = ckpt->last_saved;
      }
      telemetry.Send(message);
    }
    if (console.has_value()) console->StepDone(stats->step, stats->loss, SteadyClock::now());
    if (stats->stop) {
      if (console.has_value()) console->Break();
      ATHANOR_LOG(INFO) << "stopping after step " << stats->step << " as requested ("
                        << (g_stop_signal ? strsignal(g_stop_signal) : "by another rank") << ")";
      stopped = true;
      break;
    }
  }
  if (console.has_value()) console->Break();  // the final save may log
  if (ckpt.has_value()) {
    // The last step (or the agreed preemption step) is saved synchronously.
    const int64_t step = trainer->step();
    ProgressBlockedScope saving(progress_page.get(), ProgressOp::kCheckpointSave);
    RETURN_IF_ERROR(ckpt->SaveAndWait(*trainer, step, crash));
    if (stopped && env.rank == 0 && ckpt->through_service) {
      // The service owns the step now; the coordinator commits it.
      std::cerr << "handed step " << step << " to the checkpoint service; exiting" << std::endl;
      std::cout << "{\"event\":\"preempted\",\"handed_off_step\":" << step << "}" << std::endl;
    } else if (stopped && env.rank == 0) {
      std::cerr << "checkpointed step " << step << "; exiting" << std::endl;
      std::cout << "{\"event\":\"preempted\",\"committed_step\":" << step << "}" << std::endl;
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
  if (console.has_value()) console->Finish(SteadyClock::now());
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
