#include "worker/model/mlp_lm.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace athanor {
namespace {

// A naive double-precision forward pass over the same flat layout.
double ReferenceLoss(const MlpLm& model, const std::vector<double>& p,
                     const std::vector<uint8_t>& ctx, const std::vector<uint8_t>& tgt, int batch) {
  const ModelConfig& c = model.config();
  auto find = [&](const std::string& name) -> const ParamInfo& {
    for (const ParamInfo& info : model.layout().params()) {
      if (info.name == name) return info;
    }
    ADD_FAILURE() << "no parameter " << name;
    return model.layout().param(0);
  };
  const ParamInfo& emb = find("embed.weight");
  double total = 0.0;
  for (int b = 0; b < batch; ++b) {
    std::vector<double> x;
    for (int i = 0; i < c.context; ++i) {
      for (int e = 0; e < c.embed; ++e)
        x.push_back(p[emb.offset + ctx[b * c.context + i] * c.embed + e]);
    }
    for (int l = 0; l < c.layers; ++l) {
      const ParamInfo& w = find("hidden." + std::to_string(l) + ".weight");
      const ParamInfo& bias = find("hidden." + std::to_string(l) + ".bias");
      std::vector<double> h(c.hidden);
      for (int j = 0; j < c.hidden; ++j) {
        double z = p[bias.offset + j];
        for (size_t k = 0; k < x.size(); ++k) z += p[w.offset + j * x.size() + k] * x[k];
        h[j] = std::tanh(z);
      }
      x = h;
    }
    const ParamInfo& wo = find("out.weight");
    const ParamInfo& bo = find("out.bias");
    std::vector<double> logits(ModelConfig::kVocab);
    double mx = -1e300;
    for (int v = 0; v < ModelConfig::kVocab; ++v) {
      double z = p[bo.offset + v];
      for (int j = 0; j < c.hidden; ++j) z += p[wo.offset + v * c.hidden + j] * x[j];
      logits[v] = z;
      mx = std::max(mx, z);
    }
    double sum = 0.0;
    for (double z : logits) sum += std::exp(z - mx);
    total += mx + std::log(sum) - logits[tgt[b]];
  }
  return total;
}

class MlpLmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.context = 3;
    config_.embed = 4;
    config_.hidden = 5;
    config_.layers = 2;
    const char* text = "hello world, hello gradients";
    for (int b = 0; b < kBatch; ++b) {
      for (int i = 0; i < config_.context; ++i) ctx_.push_back(text[b * 2 + i]);
      tgt_.push_back(text[b * 2 + config_.context]);
    }
  }
  static constexpr int kBatch = 6;
  ModelConfig config_;
  std::vector<uint8_t> ctx_, tgt_;
};

TEST_F(MlpLmTest, LayoutIsInReverseLayerOrder) {
  MlpLm model(config_, Precision::kF32);
  std::vector<std::string> names;
  for (const ParamInfo& p : model.layout().params()) names.push_back(p.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"out.weight", "out.bias", "hidden.1.weight", "hidden.1.bias",
                                      "hidden.0.weight", "hidden.0.bias", "embed.weight"}));
  EXPECT_EQ(model.num_params(), 256u * 5 + 256 + 5 * 5 + 5 + 5 * 12 + 5 + 256 * 4);
  EXPECT_EQ(model.layout().param(4).shape, (std::vector<int64_t>{5, 12}));
}

TEST_F(MlpLmTest, GradientMatchesFiniteDifferences) {
  MlpLm model(config_, Precision::kF32);
  std::vector<float> params(model.num_params());
  model.Init(7, params.data());
  // Non-zero biases so their gradients are exercised away from zero.
  for (const ParamInfo& p : model.layout().params()) {
    if (p.name.find("bias") != std::string::npos) {
      for (size_t i = 0; i < p.size; ++i)
        params[p.offset + i] = 0.01f * static_cast<float>(i % 7) - 0.03f;
    }
  }
  std::vector<float> grads(model.num_params(), 0.0f);
  std::vector<size_t> prefixes;
  const double loss =
      model.ForwardBackward(params.data(), ctx_.data(), tgt_.data(), kBatch, 1.0f, grads.data(),
                            [&](size_t prefix) { prefixes.push_back(prefix); });
  std::vector<double> p(params.begin(), params.end());
  const double ref = ReferenceLoss(model, p, ctx_, tgt_, kBatch);
  EXPECT_NEAR(loss, ref, 1e-5 * ref);
  EXPECT_EQ(prefixes.back(), model.num_params());
  for (size_t i = 1; i < prefixes.size(); ++i) EXPECT_GT(prefixes[i], prefixes[i - 1]);

  int checked = 0, nonzero = 0;
  double worst = 0.0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double h = 1e-5, saved = p[i];
    p[i] = saved + h;
    const double up = ReferenceLoss(model, p, ctx_, tgt_, kBatch);
    p[i] = saved - h;
    const double down = ReferenceLoss(model, p, ctx_, tgt_, kBatch);
    p[i] = saved;
    const double numeric = (up - down) / (2 * h);
    const double err = std::abs(numeric - grads[i]) / (1e-4 + std::abs(numeric));
    worst = std::max(worst, err);
    ++checked;
    if (numeric != 0.0) ++nonzero;
  }
  EXPECT_EQ(checked, static_cast<int>(model.num_params()));
  EXPECT_GT(nonzero, 1000);
  EXPECT_LT(worst, 1e-3) << "largest relative gradient error";
}

TEST_F(MlpLmTest, GradientsAccumulateAndScale) {
  MlpLm model(config_, Precision::kF32);
  std::vector<float> params(model.num_params());
  model.Init(3, params.data());
  std::vector<float> once(model.num_params(), 0.0f), twice(model.num_params(), 0.0f);
  model.ForwardBackward(params.data(), ctx_.data(), tgt_.data(), kBatch, 2.0f, once.data(), {});
  model.ForwardBackward(params.data(), ctx_.data(), tgt_.data(), kBatch, 1.0f, twice.data(), {});
  model.ForwardBackward(params.data(), ctx_.data(), tgt_.data(), kBatch, 1.0f, twice.data(), {});
  // Same values up to summation order (embedding rows sum repeated bytes).
  for (size_t i = 0; i < once.size(); ++i) {
    ASSERT_NEAR(once[i], twice[i], 1e-5f * std::abs(twice[i]) + 1e-9f) << i;
  }
}

TEST_F(MlpLmTest, ReducedPrecisionStaysClose) {
  for (Precision prec : {Precision::kBF16, Precision::kF16}) {
    MlpLm full(config_, Precision::kF32), low(config_, prec);
    std::vector<float> params(full.num_params()), rounded(full.num_params());
    full.Init(5, params.data());
    RoundArray(prec, params.data(), rounded.data(), params.size());
    const double a = full.Loss(params.data(), ctx_.data(), tgt_.data(), kBatch);
    const double b = low.Loss(rounded.data(), ctx_.data(), tgt_.data(), kBatch);
    EXPECT_NE(a, b) << PrecisionName(prec);
    EXPECT_NEAR(a, b, 0.02 * a) << PrecisionName(prec);
  }
}

}  // namespace
}  // namespace athanor
