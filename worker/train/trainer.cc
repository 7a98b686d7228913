#include "worker/train/trainer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"

namespace athanor {
namespace {

constexpr uint64_t kLossTag = 1;
constexpr uint64_t kFoundInfTag = 2;
constexpr uint64_t kGradTagBase = 1000;

GradSyncOptions SyncOptions(const TrainerOptions& o) {
  GradSyncOptions s;
  s.bucket_bytes = o.bucket_bytes;
  s.first_bucket_bytes = o.first_bucket_bytes;
  s.wire = o.precision;
  s.tag_base = kGradTagBase;
  s.timeout = o.timeout;
  return s;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(const TrainerOptions& options,
                                                         const TextDataset* data,
                                                         Communicator* comm) {
  const ModelConfig& m = options.model;
  if (m.context < 1 || m.embed < 1 || m.hidden < 1 || m.layers < 1) {
    return absl::InvalidArgumentError("context, embed, hidden and layers must all be >= 1");
  }
  if (options.micro_batch < 1 || options.accum < 1) {
    return absl::InvalidArgumentError("micro-batch and accum must be >= 1");
  }
  if (data == nullptr || data->context() != m.context) {
    return absl::InvalidArgumentError("dataset missing or built for another context length");
  }
  if (!(options.clip_grad_norm >= 0.0f) || std::isinf(options.clip_grad_norm)) {
    return absl::InvalidArgumentError(
        absl::StrCat("clip-grad-norm must be a finite value >= 0 (0: off), got ",
                     options.clip_grad_norm));
  }
  if (options.inject_overflow_step >= 0 && options.precision != Precision::kF16) {
    return absl::InvalidArgumentError("--inject-overflow-step needs --precision fp16");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<MatMul> matmul, CreateMatMul(options.device));
  MlpLm probe(m, options.precision, matmul.get());
  ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> opt,
                   CreateOptimizer(options.optimizer, probe.num_params()));
  return std::unique_ptr<Trainer>(
      new Trainer(options, data, comm, std::move(matmul), std::move(opt)));
}

Trainer::Trainer(const TrainerOptions& options, const TextDataset* data, Communicator* comm,
                 std::unique_ptr<MatMul> matmul, std::unique_ptr<Optimizer> optimizer)
    : options_(options),
      data_(data),
      comm_(comm),
      rank_(comm ? comm->rank() : 0),
      world_(comm ? comm->world_size() : 1),
      matmul_(std::move(matmul)),
      model_(options.model, options.precision, matmul_.get()),
      optimizer_(std::move(optimizer)),
      scaler_(options.precision == Precision::kF16),
      sync_(comm, model_.num_params(), SyncOptions(options)) {
  params_.resize(model_.num_params());
  grads_.resize(model_.num_params());
  if (options_.precision != Precision::kF32) compute_.resize(params_.size());
  model_.Init(options_.seed, params_.data());
  contexts_.resize(static_cast<size_t>(options_.micro_batch) * options_.model.context);
  targets_.resize(options_.micro_batch);
}

absl::Status Trainer::AllReduceScalars(float* values, size_t n, ReduceOp op, uint64_t tag) {
  if (comm_ == nullptr || world_ == 1) return absl::OkStatus();
  CollectiveOptions opts;
  opts.tag = tag;
  opts.timeout = options_.timeout;
  std::unique_ptr<Work> work = comm_->AllReduceAsync(values, values, n, DataType::kF32, op, opts);
  return work->Wait(options_.timeout);
}

absl::StatusOr<StepStats> Trainer::Step(bool stop_requested) {
  const auto start = std::chrono::steady_clock::now();
  const int mb = options_.micro_batch, accum = options_.accum;
  const int64_t global = static_cast<int64_t>(world_) * mb * accum;
  const float scale = scaler_.scale();
  const float grad_scale = static_cast<float>(scale / static_cast<double>(global));

  const float* weights = params_.data();
  if (options_.precision != Precision::kF32) {
    RoundArray(options_.precision, params_.data(), compute_.data(), params_.size());
    weights = compute_.data();
  }
  std::fill(grads_.begin(), grads_.end(), 0.0f);
  if (step_ == options_.inject_overflow_step && rank_ == options_.inject_overflow_rank) {
    grads_[0] = std::numeric_limits<float>::infinity();  // test hook: forced overflow
  }

  sync_.Begin(grads_.data());
  GradReadyFn ready;
  if (options_.overlap) ready = [this](size_t prefix) { sync_.OnPrefixFinal(prefix); };
  double loss_sum = 0.0;
  for (int m = 0; m < accum; ++m) {
    const int64_t first = static_cast<int64_t>(rank_) * mb * accum + static_cast<int64_t>(m) * mb;
    data_->Fill(options_.seed, step_, first, mb, contexts_.data(), targets_.data());
    const bool last = m == accum - 1;
    loss_sum += model_.ForwardBackward(weights, contexts_.data(), targets_.data(), mb, grad_scale,
                                       grads_.data(), last ? ready : GradReadyFn());
  }
  double wait_s = 0.0;
  RETURN_IF_ERROR(sync_.Finish(&wait_s));

  bool skip = false;
  if (scaler_.enabled()) {
    const float inv = 1.0f / scale;
    float found_inf = 0.0f;
    for (float& g : grads_) {
      g *= inv;
      if (!std::isfinite(g)) found_inf = 1.0f;
    }
    RETURN_IF_ERROR(AllReduceScalars(&found_inf, 1, ReduceOp::kMax, kFoundInfTag));
    skip = scaler_.Update(found_inf > 0.0f);
  }
  // After unscaling, so the limit is on the true gradient; never on a skipped step.
  double grad_norm = 0.0;
  if (!skip && options_.clip_grad_norm > 0.0f) {
    grad_norm = ClipGradNorm(grads_.data(), grads_.size(), options_.clip_grad_norm);
  }
  if (!skip) optimizer_->Step(params_.data(), grads_.data());

  // One small all-reduce carries the loss and the stop votes (any vote stops all).
  float loss_and_stop[2] = {static_cast<float>(loss_sum), stop_requested ? 1.0f : 0.0f};
  RETURN_IF_ERROR(AllReduceScalars(loss_and_stop, 2, ReduceOp::kSum, kLossTag));
  const float loss = loss_and_stop[0];

  StepStats stats;
  stats.step = step_;
  stats.loss = static_cast<double>(loss) / static_cast<double>(global);
  stats.loss_scale = scale;
  stats.skipped = skip;
  stats.grad_norm = grad_norm;
  stats.stop = loss_and_stop[1] > 0.0f;
  stats.comm_wait_ms = wait_s * 1e3;
  stats.step_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  stats.tokens_per_s = static_cast<double>(global) / (stats.step_ms / 1e3);
  stats.grad_bytes = world_ > 1 ? sync_.wire_bytes() : 0;
  ++step_;
  return stats;
}

std::vector<NamedTensor> Trainer::StateTensors() const {
  std::vector<NamedTensor> out = NamedViews(model_.layout(), params_.data(), "param.");
  for (const auto& [name, buffer] : optimizer_->State()) {
    std::vector<NamedTensor> views = NamedViews(model_.layout(), buffer, name + ".");
    out.insert(out.end(), views.begin(), views.end());
  }
  return out;
}

absl::Status Trainer::LoadState(const std::map<std::string, std::vector<float>>& tensors,
                                const std::map<std::string, std::string>& metadata) {
  auto field = [&](const std::string& key) -> absl::StatusOr<std::string> {
    auto it = metadata.find(key);
    if (it == metadata.end()) {
      return absl::InvalidArgumentError(absl::StrCat("state metadata lacks '", key, "'"));
    }
    return it->second;
  };
  for (const auto& [key, want] : std::vector<std::pair<std::string, std::string>>{
           {"seed", std::to_string(options_.seed)},
           {"optimizer", options_.optimizer.kind},
           {"precision", PrecisionName(options_.precision)}}) {
    ASSIGN_OR_RETURN(std::string got, field(key));
    if (got != want) {
      return absl::InvalidArgumentError(
          absl::StrCat("state has ", key, "=", got, " but this run has ", key, "=", want));
    }
  }
  auto load = [&](const std::string& prefix, float* dst) -> absl::Status {
    for (const ParamInfo& p : model_.layout().params()) {
      auto it = tensors.find(prefix + p.name);
      if (it == tensors.end() || it->second.size() != p.size) {
        return absl::InvalidArgumentError(
            absl::StrCat("state tensor '", prefix, p.name, "' is missing or has ",
                         it == tensors.end() ? 0 : it->second.size(), " values, want ", p.size));
      }
      std::copy(it->second.begin(), it->second.end(), dst + p.offset);
    }
    return absl::OkStatus();
  };
  std::vector<float> params(params_.size());
  RETURN_IF_ERROR(load("param.", params.data()));
  for (const auto& [name, buffer] : optimizer_->MutableState()) {
    RETURN_IF_ERROR(load(name + ".", buffer));
  }
  params_ = std::move(params);
  ASSIGN_OR_RETURN(std::string step, field("step"));
  ASSIGN_OR_RETURN(std::string opt_steps, field("optimizer_steps"));
  ASSIGN_OR_RETURN(std::string scale, field("loss_scale"));
  ASSIGN_OR_RETURN(std::string clean, field("loss_scale_clean_steps"));
  int64_t step_v = 0, opt_v = 0;
  int clean_v = 0;
  float scale_v = 0;
  if (!absl::SimpleAtoi(step, &step_v) || !absl::SimpleAtoi(opt_steps, &opt_v) ||
      !absl::SimpleAtoi(clean, &clean_v) || !absl::SimpleAtof(scale, &scale_v)) {
    return absl::InvalidArgumentError("state metadata has a malformed number");
  }
  step_ = step_v;
  optimizer_->set_steps(opt_v);
  scaler_.Restore(scale_v, clean_v);
  return absl::OkStatus();
}

std::map<std::string, std::string> Trainer::StateMetadata() const {
  return {{"step", std::to_string(step_)},
          {"data_cursor", std::to_string(step_)},
          {"seed", std::to_string(options_.seed)},
          {"rank", std::to_string(rank_)},
          {"world_size", std::to_string(world_)},
          {"precision", PrecisionName(options_.precision)},
          {"optimizer", options_.optimizer.kind},
          {"optimizer_steps", std::to_string(optimizer_->steps())},
          {"loss_scale", absl::StrFormat("%.9g", scaler_.scale())},
          {"loss_scale_clean_steps", std::to_string(scaler_.clean_steps())}};
}

}  // namespace athanor
