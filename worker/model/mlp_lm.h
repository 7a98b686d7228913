// A character-level MLP language model (Bengio et al. 2003): the embeddings
// of `context` previous bytes are concatenated, go through `layers` tanh
// hidden layers, and a linear layer gives logits over the 256 byte values.
// Loss is softmax cross-entropy of the next byte.
//
// Parameters live in one flat f32 buffer owned by the caller, laid out in
// REVERSE layer order (out, hidden.L-1 ... hidden.0, embed) because the
// backward pass finishes gradients from the last layer to the first: the
// prefix of the gradient buffer that is final grows front to back, so
// gradient buckets become ready in order and can be all-reduced while the
// rest of the backward pass runs.
//
// Mixed precision: with Precision kBF16/kF16 every matrix-product input
// (activations, output gradients) is rounded to that format and products
// accumulate in f32 (OpenBLAS sgemm); the caller passes weights already
// rounded (a compute copy). Gradients accumulate (+=) into f32.
// Matrix products go through a MatMul (OpenBLAS by default, cuBLAS when asked).
//
// Threading: a MlpLm holds scratch space; one thread uses it at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "worker/model/half.h"
#include "worker/model/matmul.h"
#include "worker/model/param_layout.h"

namespace athanor {

struct ModelConfig {
  int context = 8;   // input bytes per sample
  int embed = 16;    // embedding width per byte
  int hidden = 128;  // width of each hidden layer
  int layers = 1;    // number of hidden tanh layers (>= 1)
  static constexpr int kVocab = 256;
};

// Called during backward with the number of leading gradient elements that
// are final for this call (monotonically increasing, ending at total()).
using GradReadyFn = std::function<void(size_t final_prefix)>;

class MlpLm {
 public:
  // `matmul` is not owned and must outlive the model; null: an owned CPU one.
  MlpLm(const ModelConfig& config, Precision precision, MatMul* matmul = nullptr);

  const ModelConfig& config() const { return config_; }
  const ParamLayout& layout() const { return layout_; }
  size_t num_params() const { return layout_.total(); }

  // Deterministic initialisation from `seed`: weights uniform in
  // +-1/sqrt(fan_in), embeddings uniform in +-1, biases zero.
  void Init(uint64_t seed, float* params) const;

  // `contexts`: batch*context bytes; `targets`: batch bytes. Adds
  // grad_scale * d(sum of per-sample losses)/d(params) into `grads` and
  // returns the sum of per-sample losses (unscaled). `ready` may be empty.
  double ForwardBackward(const float* params, const uint8_t* contexts, const uint8_t* targets,
                         int batch, float grad_scale, float* grads, const GradReadyFn& ready);

  // Forward only: the sum of per-sample losses.
  double Loss(const float* params, const uint8_t* contexts, const uint8_t* targets, int batch);

 private:
  struct LayerIds {
    int weight;
    int bias;
  };
  double Forward(const float* params, const uint8_t* contexts, const uint8_t* targets, int batch);
  int InputWidth(int layer) const;

  const ModelConfig config_;
  const Precision precision_;
  std::unique_ptr<MatMul> owned_matmul_;
  MatMul* matmul_;
  ParamLayout layout_;
  LayerIds out_;
  std::vector<LayerIds> hidden_;  // index = layer
  int embed_;

  // Scratch, resized per batch.
  std::vector<std::vector<float>>
      inputs_;  // inputs_[l]: rounded input of hidden layer l; [L] feeds out
  std::vector<std::vector<float>> acts_;  // acts_[l]: tanh output of layer l (f32)
  std::vector<float> probs_;              // softmax, then dlogits
  std::vector<float> dact_;
  std::vector<float> dz_;
};

}  // namespace athanor
