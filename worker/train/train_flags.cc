#include "worker/train/train_flags.h"

#include <cmath>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/options.h"
#include "worker/train/optimizer.h"

namespace athanor {

absl::Status ParseTrainFlags(int argc, const char* const* argv, TrainFlags* f) {
  TrainerOptions& t = f->trainer;
  std::string precision = "fp32";
  double bucket_mb = 25.0, first_bucket_mb = 1.0;
  bool no_overlap = false;
  std::string policy = "wait";
  const char* env_uri = std::getenv("ATHANOR_CHECKPOINT_URI");
  const char* env_job = std::getenv("ATHANOR_JOB_ID");
  if (env_uri != nullptr) f->checkpoint_uri = env_uri;
  if (const char* g = std::getenv("ATHANOR_GLOBAL_BATCH"); g != nullptr && *g != '\0') {
    if (!absl::SimpleAtoi(g, &f->global_batch) || f->global_batch < 0) {
      return absl::InvalidArgumentError(absl::StrCat("ATHANOR_GLOBAL_BATCH: expected a sample count, got '", g, "'"));
    }
  }
  if (env_job != nullptr && *env_job != '\0') f->job_id = env_job;
  if (const char* svc = std::getenv("ATHANOR_CHECKPOINT_SERVICE"); svc != nullptr) {
    f->checkpoint_service = svc;
  }
  po::options_description desc("athanor-train options");
  auto add = [&desc](const char* name, const po::value_semantic* value, const char* help) {
    desc.add_options()(name, value, help);
  };
  add("data", po::value(&f->data)->default_value(f->data), "text file, or synthetic:BYTES");
  add("context", po::value(&t.model.context)->default_value(8), "input bytes per sample");
  add("embed", po::value(&t.model.embed)->default_value(16), "embedding width");
  add("hidden", po::value(&t.model.hidden)->default_value(128), "hidden layer width");
  add("layers", po::value(&t.model.layers)->default_value(1), "hidden tanh layers");
  add("steps", po::value(&f->steps)->default_value(100),
      "train until this many steps are done (resumed ones count)");
  add("micro-batch", po::value(&t.micro_batch)->default_value(8),
      "samples per micro-batch per rank");
  add("accum", po::value(&t.accum)->default_value(1),
      "micro-batches per step (gradient accumulation)");
  add("global-batch", po::value(&f->global_batch)->default_value(f->global_batch),
      "samples per step over all ranks, kept at any world size: --accum adapts to it, and "
      "--micro-batch (the largest allowed) shrinks where it must; 0: world x micro-batch x "
      "accum (default $ATHANOR_GLOBAL_BATCH, set for elastic jobs)");
  add("precision", po::value(&precision)->default_value("fp32"), "fp32 | bf16 | fp16");
  add("device", po::value(&t.device)->default_value("cpu"),
      "matrix products on cpu (OpenBLAS) or cuda (cuBLAS)");
  add("optimizer", po::value(&t.optimizer.kind)->default_value(t.optimizer.kind),
      "adamw | sgd (with momentum)");
  const std::string lr_help =
      absl::StrFormat("learning rate (default: %g for adamw, %g for sgd)",
                      DefaultLearningRate("adamw"), DefaultLearningRate("sgd"));
  add("lr", po::value(&t.optimizer.lr), lr_help.c_str());
  add("clip-grad-norm", po::value(&t.clip_grad_norm)->default_value(t.clip_grad_norm, "1"),
      "clip the global L2 norm of the averaged gradient to this each step (after fp16 "
      "unscaling; overflow steps are skipped, not clipped); 0: off");
  add("momentum", po::value(&t.optimizer.momentum)->default_value(0.9f, "0.9"), "sgd momentum");
  add("weight-decay", po::value(&t.optimizer.weight_decay)->default_value(0.0f, "0"),
      "weight decay (decoupled for adamw)");
  add("seed", po::value(&t.seed)->default_value(1), "seed for init and data sampling");
  add("backend", po::value(&f->backend), "collectives backend: ucx | mpi | nccl (default ucx)");
  add("bucket-mb", po::value(&bucket_mb)->default_value(25.0, "25"), "gradient bucket size, MiB");
  add("first-bucket-mb", po::value(&first_bucket_mb)->default_value(1.0, "1"),
      "first (small) bucket size, MiB");
  add("no-overlap", po::bool_switch(&no_overlap), "all-reduce after backward, not during it");
  add("dump-weights", po::value(&f->dump_weights),
      "rank 0 writes the final f32 weights (safetensors) here");
  add("save-state", po::value(&f->save_state),
      "at the end (or on SIGTERM), rank 0 writes the full training state (safetensors) here");
  add("resume-from", po::value(&f->resume_from), "start from a --save-state file");
  add("checkpoint-uri", po::value(&f->checkpoint_uri),
      "checkpoint store (file:///dir, s3://bucket/prefix); default $ATHANOR_CHECKPOINT_URI; "
      "resumes from its newest committed step");
  add("checkpoint-every", po::value(&f->checkpoint_every)->default_value(0),
      "checkpoint every N steps (0: only at the end and on SIGTERM)");
  add("job-id", po::value(&f->job_id), "checkpoint job name (default $ATHANOR_JOB_ID, else local)");
  add("keep", po::value(&f->keep)->default_value(3), "committed checkpoints to keep");
  add("checkpoint-policy", po::value(&policy)->default_value("wait"),
      "when a checkpoint is still in flight: wait | skip");
  add("checkpoint-service", po::value(&f->checkpoint_service),
      "hand checkpoints to the node checkpoint service at this unix socket (default "
      "$ATHANOR_CHECKPOINT_SERVICE; empty: upload in the rank)");
  add("all-ranks-log", po::bool_switch(&f->all_ranks_log), "every rank prints its step lines");
  add("inject-overflow-step", po::value(&t.inject_overflow_step)->default_value(-1),
      "fp16 test hook: make this step's gradients overflow on one rank");
  add("inject-overflow-rank", po::value(&f->inject_overflow_rank)->default_value(-1),
      "the rank for --inject-overflow-step (-1: the last)");
  add("inject-slow", po::value(&f->inject_slow),
      "straggler test hook RANK:FROM:TO:FACTOR[:ATTEMPT]: that rank's steps FROM..TO-1 take "
      "FACTOR x their compute time (in attempt ATTEMPT only, when given)");
  add("timeout-s", po::value(&f->timeout_s)->default_value(120), "collective timeout, seconds");
  add("log-level", po::value(&f->log_level)->default_value("info"),
      "debug | info | warning | error");
  ParsedCommandLine parsed;
  absl::Status s =
      ParseOptions(argc, argv, desc,
                   "usage: athanor-train [options]\n"
                   "On a terminal, rank 0 shows a progress line (step, loss, tokens/s, ETA) and a\n"
                   "summary; when stdout is a file or a pipe it prints one JSON line per step.",
                   &parsed);
  if (!s.ok()) return s;
  f->help = parsed.help;
  if (f->help) return absl::OkStatus();
  f->backend_given = parsed.vars.count("backend") > 0;
  if (parsed.vars.count("lr") == 0) {
    t.optimizer.lr = DefaultLearningRate(t.optimizer.kind);  // 0 for an unknown kind: named below
  }
  if (t.optimizer.kind != "adamw" && t.optimizer.kind != "sgd") {
    return absl::InvalidArgumentError(
        absl::StrCat("--optimizer must be adamw or sgd, not '", t.optimizer.kind, "'"));
  }
  if (!(t.optimizer.lr > 0.0f)) return absl::InvalidArgumentError("--lr must be > 0");
  if (!(t.clip_grad_norm >= 0.0f) || std::isinf(t.clip_grad_norm)) {
    return absl::InvalidArgumentError("--clip-grad-norm must be a finite value >= 0 (0: off)");
  }
  if (!ParsePrecision(precision, &t.precision)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--precision must be fp32, bf16 or fp16, not '", precision, "'"));
  }
  if (bucket_mb <= 0 || first_bucket_mb <= 0) {
    return absl::InvalidArgumentError("--bucket-mb and --first-bucket-mb must be > 0");
  }
  if (policy != "wait" && policy != "skip") {
    return absl::InvalidArgumentError(
        absl::StrCat("--checkpoint-policy must be wait or skip, not '", policy, "'"));
  }
  f->checkpoint_skip = policy == "skip";
  if (f->checkpoint_every < 0) return absl::InvalidArgumentError("--checkpoint-every must be >= 0");
  if (f->keep < 1) return absl::InvalidArgumentError("--keep must be >= 1");
  if (f->job_id.empty()) return absl::InvalidArgumentError("--job-id must not be empty");
  if (f->steps < 0) return absl::InvalidArgumentError("--steps must be >= 0");
  if (f->global_batch < 0) return absl::InvalidArgumentError("--global-batch must be >= 0 (0: off)");
  if (f->timeout_s < 1) return absl::InvalidArgumentError("--timeout-s must be >= 1");
  t.bucket_bytes = static_cast<size_t>(bucket_mb * 1048576.0);
  t.first_bucket_bytes = static_cast<size_t>(first_bucket_mb * 1048576.0);
  t.overlap = !no_overlap;
  t.timeout = std::chrono::seconds(f->timeout_s);
  return absl::OkStatus();
}

}  // namespace athanor
