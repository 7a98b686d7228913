#include "worker/model/mlp_lm.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "worker/model/rng.h"

namespace athanor {

MlpLm::MlpLm(const ModelConfig& config, Precision precision, MatMul* matmul)
    : config_(config), precision_(precision), matmul_(matmul) {
  if (matmul_ == nullptr) {
    owned_matmul_ = std::move(CreateMatMul("cpu")).value();  // "cpu" cannot fail
    matmul_ = owned_matmul_.get();
  }
  const int64_t v = ModelConfig::kVocab;
  out_.weight = layout_.Add("out.weight", {v, config_.hidden});
  out_.bias = layout_.Add("out.bias", {v});
  hidden_.resize(config_.layers);
  for (int l = config_.layers - 1; l >= 0; --l) {
    const std::string prefix = "hidden." + std::to_string(l);
    hidden_[l].weight = layout_.Add(prefix + ".weight", {config_.hidden, InputWidth(l)});
    hidden_[l].bias = layout_.Add(prefix + ".bias", {config_.hidden});
  }
  embed_ = layout_.Add("embed.weight", {v, config_.embed});
}

int MlpLm::InputWidth(int layer) const {
  return layer == 0 ? config_.context * config_.embed : config_.hidden;
}

void MlpLm::Init(uint64_t seed, float* params) const {
  SplitMix64 rng(seed ^ 0x6d6c706c6dULL);
  auto fill = [&](int id, float bound) {
    const ParamInfo& p = layout_.param(id);
    for (size_t i = 0; i < p.size; ++i) params[p.offset + i] = bound * rng.NextSymmetric();
  };
  auto zero = [&](int id) {
    const ParamInfo& p = layout_.param(id);
    std::fill(params + p.offset, params + p.offset + p.size, 0.0f);
  };
  fill(embed_, 1.0f);
  for (int l = 0; l < config_.layers; ++l) {
    fill(hidden_[l].weight, 1.0f / std::sqrt(static_cast<float>(InputWidth(l))));
    zero(hidden_[l].bias);
  }
  fill(out_.weight, 1.0f / std::sqrt(static_cast<float>(config_.hidden)));
  zero(out_.bias);
}

double MlpLm::Forward(const float* params, const uint8_t* contexts, const uint8_t* targets,
                      int batch) {
  const int layers = config_.layers, hidden = config_.hidden, embed = config_.embed;
  const int ctx = config_.context, vocab = ModelConfig::kVocab;
  inputs_.resize(layers + 1);
  acts_.resize(layers);

  // Embedding lookup; the compute-copy weights are already rounded.
  const float* table = params + layout_.param(embed_).offset;
  std::vector<float>& x = inputs_[0];
  x.resize(static_cast<size_t>(batch) * ctx * embed);
  for (int b = 0; b < batch; ++b) {
    for (int c = 0; c < ctx; ++c) {
      const float* row = table + static_cast<size_t>(contexts[b * ctx + c]) * embed;
      std::copy(row, row + embed, x.data() + (static_cast<size_t>(b) * ctx + c) * embed);
    }
  }

  for (int l = 0; l < layers; ++l) {
    const int in = InputWidth(l);
    const float* w = params + layout_.param(hidden_[l].weight).offset;
    const float* bias = params + layout_.param(hidden_[l].bias).offset;
    std::vector<float>& h = acts_[l];
    h.resize(static_cast<size_t>(batch) * hidden);
    for (int b = 0; b < batch; ++b) std::copy(bias, bias + hidden, h.data() + b * hidden);
    matmul_->Gemm(false, true, batch, hidden, in, 1.0f, inputs_[l].data(), in, w, in, 1.0f,
                  h.data(), hidden);
    for (float& v : h) v = std::tanh(v);
    inputs_[l + 1].resize(h.size());
    RoundArray(precision_, h.data(), inputs_[l + 1].data(), h.size());
  }

  const float* wo = params + layout_.param(out_.weight).offset;
  const float* bo = params + layout_.param(out_.bias).offset;
  probs_.resize(static_cast<size_t>(batch) * vocab);
  for (int b = 0; b < batch; ++b) std::copy(bo, bo + vocab, probs_.data() + b * vocab);
  matmul_->Gemm(false, true, batch, vocab, hidden, 1.0f, inputs_[layers].data(), hidden, wo, hidden,
                1.0f, probs_.data(), vocab);

  double loss = 0.0;
  for (int b = 0; b < batch; ++b) {
    float* row = probs_.data() + b * vocab;
    const float mx = *std::max_element(row, row + vocab);
    double sum = 0.0;
    for (int k = 0; k < vocab; ++k) sum += std::exp(static_cast<double>(row[k] - mx));
    const double log_sum = std::log(sum);
    loss += log_sum - (row[targets[b]] - mx);
    for (int k = 0; k < vocab; ++k) {
      row[k] = static_cast<float>(std::exp(static_cast<double>(row[k] - mx) - log_sum));
    }
  }
  return loss;
}

double MlpLm::Loss(const float* params, const uint8_t* contexts, const uint8_t* targets,
                   int batch) {
  return Forward(params, contexts, targets, batch);
}

double MlpLm::ForwardBackward(const float* params, const uint8_t* contexts, const uint8_t* targets,
                              int batch, float grad_scale, float* grads, const GradReadyFn& ready) {
  const double loss = Forward(params, contexts, targets, batch);
  const int layers = config_.layers, hidden = config_.hidden, embed = config_.embed;
  const int ctx = config_.context, vocab = ModelConfig::kVocab;
  auto notify = [&](int id) {
    if (ready) ready(layout_.param(id).offset + layout_.param(id).size);
  };

  // dlogits = grad_scale * (softmax - onehot), in place in probs_.
  for (int b = 0; b < batch; ++b) {
    float* row = probs_.data() + b * vocab;
    row[targets[b]] -= 1.0f;
    for (int k = 0; k < vocab; ++k) row[k] *= grad_scale;
  }
  // Bias gradients come from the unrounded f32 values; matmul inputs are rounded.
  float* gbo = grads + layout_.param(out_.bias).offset;
  for (int b = 0; b < batch; ++b) {
    for (int k = 0; k < vocab; ++k) gbo[k] += probs_[b * vocab + k];
  }
  RoundArray(precision_, probs_.data(), probs_.data(), probs_.size());
  matmul_->Gemm(true, false, vocab, hidden, batch, 1.0f, probs_.data(), vocab,
                inputs_[layers].data(), hidden, 1.0f, grads + layout_.param(out_.weight).offset,
                hidden);
  notify(out_.bias);

  dact_.resize(static_cast<size_t>(batch) * hidden);
  matmul_->Gemm(false, false, batch, hidden, vocab, 1.0f, probs_.data(), vocab,
                params + layout_.param(out_.weight).offset, hidden, 0.0f, dact_.data(), hidden);

  for (int l = layers - 1; l >= 0; --l) {
    const int in = InputWidth(l);
    const std::vector<float>& h = acts_[l];
    dz_.resize(h.size());
    for (size_t i = 0; i < h.size(); ++i) dz_[i] = dact_[i] * (1.0f - h[i] * h[i]);
    float* gb = grads + layout_.param(hidden_[l].bias).offset;
    for (int b = 0; b < batch; ++b) {
      for (int j = 0; j < hidden; ++j) gb[j] += dz_[b * hidden + j];
    }
    RoundArray(precision_, dz_.data(), dz_.data(), dz_.size());
    matmul_->Gemm(true, false, hidden, in, batch, 1.0f, dz_.data(), hidden, inputs_[l].data(), in,
                  1.0f, grads + layout_.param(hidden_[l].weight).offset, in);
    notify(hidden_[l].bias);
    dact_.resize(static_cast<size_t>(batch) * in);
    matmul_->Gemm(false, false, batch, in, hidden, 1.0f, dz_.data(), hidden,
                  params + layout_.param(hidden_[l].weight).offset, in, 0.0f, dact_.data(), in);
  }

  // dact_ is now d(input of layer 0) = d(concatenated embeddings).
  float* ge = grads + layout_.param(embed_).offset;
  for (int b = 0; b < batch; ++b) {
    for (int c = 0; c < ctx; ++c) {
      float* row = ge + static_cast<size_t>(contexts[b * ctx + c]) * embed;
      const float* d = dact_.data() + (static_cast<size_t>(b) * ctx + c) * embed;
      for (int e = 0; e < embed; ++e) row[e] += d[e];
    }
  }
  notify(embed_);
  return loss;
}

}  // namespace athanor
