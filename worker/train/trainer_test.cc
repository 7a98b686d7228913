#include "worker/train/trainer.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "worker/train/testing/recording_communicator.h"
#include "worker/train/testing/thread_communicator.h"

namespace athanor {
namespace {

TrainerOptions SmallOptions() {
  TrainerOptions o;
  o.model.context = 4;
  o.model.embed = 8;
  o.model.hidden = 32;
  o.model.layers = 2;
  o.optimizer.kind = "sgd";
  o.optimizer.lr = 0.05f;
  o.seed = 11;
  o.first_bucket_bytes = 4096;
  o.bucket_bytes = 16384;
  return o;
}

struct RunResult {
  std::vector<float> params;                  // rank 0's
  std::vector<std::vector<StepStats>> stats;  // [rank][step]
  std::vector<std::vector<float>> all_params;
};

// Trains `steps` steps on `world` thread-ranks (world 1: no communicator).
RunResult Train(const TrainerOptions& o, const TextDataset& data, int world, int steps) {
  RunResult result;
  result.stats.resize(world);
  result.all_params.resize(world);
  ThreadWorld tw(world);
  auto body = [&](int rank) {
    std::unique_ptr<Communicator> comm = world > 1 ? tw.Join(rank) : nullptr;
    auto trainer = Trainer::Create(o, &data, comm.get());
    ASSERT_TRUE(trainer.ok()) << trainer.status();
    for (int s = 0; s < steps; ++s) {
      auto st = (*trainer)->Step();
      ASSERT_TRUE(st.ok()) << st.status();
      result.stats[rank].push_back(*st);
    }
    result.all_params[rank] = (*trainer)->params();
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) threads.emplace_back(body, r);
  for (std::thread& t : threads) t.join();
  result.params = result.all_params[0];
  return result;
}

double MaxAbs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, static_cast<double>(std::abs(x)));
  return m;
}

double MaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, static_cast<double>(std::abs(a[i] - b[i])));
  return m;
}

class TrainerTest : public ::testing::Test {
 protected:
  TextDataset data_ = TextDataset::FromString(SyntheticText(20000), 4);
};

TEST_F(TrainerTest, FactorisationsOfOneGlobalBatchTrainTheSameWeights) {
  TrainerOptions a = SmallOptions();
  a.micro_batch = 8;
  a.accum = 2;
  TrainerOptions b = a;
  b.accum = 4;
  TrainerOptions c = a;
  c.micro_batch = 32;
  c.accum = 1;
  RunResult ra = Train(a, data_, 2, 20), rb = Train(b, data_, 1, 20), rc = Train(c, data_, 1, 20);
  EXPECT_EQ(ra.all_params[0], ra.all_params[1]);  // ranks agree bitwise
  const double scale = MaxAbs(rb.params);
  EXPECT_GT(MaxDiff(rb.params, Train(SmallOptions(), data_, 1, 0).params), 1e-3);  // it trained
  EXPECT_LE(MaxDiff(ra.params, rb.params), 1e-5 * scale);
  EXPECT_LE(MaxDiff(rc.params, rb.params), 1e-5 * scale);
}

TEST_F(TrainerTest, AdamWLossesMatchAcrossFactorisations) {
  TrainerOptions a = SmallOptions();
  a.optimizer.kind = "adamw";
  a.optimizer.lr = 3e-3f;
  a.micro_batch = 8;
  a.accum = 2;
  TrainerOptions c = a;
  c.micro_batch = 32;
  c.accum = 1;
  RunResult ra = Train(a, data_, 2, 20), rc = Train(c, data_, 1, 20);
  for (int s = 0; s < 20; ++s) {
    EXPECT_NEAR(ra.stats[0][s].loss, rc.stats[0][s].loss, 1e-4 * rc.stats[0][s].loss) << s;
    EXPECT_EQ(ra.stats[0][s].loss, ra.stats[1][s].loss);
  }
}

TEST_F(TrainerTest, SameCommandGivesBitwiseIdenticalWeights) {
  TrainerOptions o = SmallOptions();
  o.accum = 2;
  o.precision = Precision::kBF16;
  EXPECT_EQ(Train(o, data_, 2, 10).params, Train(o, data_, 2, 10).params);
}

TEST_F(TrainerTest, OverlapLaunchesBucketsBeforeBackwardEnds) {
  for (bool overlap : {true, false}) {
    TrainerOptions o = SmallOptions();
    o.overlap = overlap;
    o.accum = 1;  // with accumulation, earlier micro-batches already filled every gradient
    RecordingCommunicator comm(2);
    auto trainer = Trainer::Create(o, &data_, &comm);
    ASSERT_TRUE(trainer.ok());
    const ParamInfo& embed = (*trainer)->model().layout().params().back();
    ASSERT_EQ(embed.name, "embed.weight");
    int grad_calls = 0;
    float embed_abs_at_first_bucket = -1.0f;
    comm.on_call = [&](const RecordingCommunicator::Call& call) {
      if (call.tag < 1000) return;  // loss / flag all-reduces
      if (grad_calls++ == 0) {
        // The first bucket starts at the gradient buffer; the embedding
        // gradient (last in the buffer, computed last) must not exist yet.
        const float* grads = static_cast<const float*>(call.send);
        float sum = 0;
        for (size_t i = 0; i < embed.size; ++i) sum += std::abs(grads[embed.offset + i]);
        embed_abs_at_first_bucket = sum;
      }
    };
    ASSERT_TRUE((*trainer)->Step().ok());
    const size_t buckets = comm.calls().size() - 1;  // minus the loss all-reduce
    EXPECT_EQ(static_cast<int>(buckets), grad_calls);
    EXPECT_GE(grad_calls, 3);
    if (overlap) {
      EXPECT_EQ(embed_abs_at_first_bucket, 0.0f);
    } else {
      EXPECT_GT(embed_abs_at_first_bucket, 0.0f);
    }
  }
}

TEST_F(TrainerTest, Fp16OverflowSkipsExactlyThatStepOnEveryRank) {
  TrainerOptions o = SmallOptions();
  o.precision = Precision::kF16;
  o.inject_overflow_step = 3;
  o.inject_overflow_rank = 1;
  RunResult r = Train(o, data_, 2, 6);
  for (int rank = 0; rank < 2; ++rank) {
    for (int s = 0; s < 6; ++s) {
      EXPECT_EQ(r.stats[rank][s].skipped, s == 3) << "rank " << rank << " step " << s;
      EXPECT_EQ(r.stats[rank][s].loss_scale, s <= 3 ? 65536.0f : 32768.0f) << s;
      // Clipping (on by default) saw the unscaled norm, and not the skipped step's.
      if (s == 3) {
        EXPECT_EQ(r.stats[rank][s].grad_norm, 0.0) << "rank " << rank;
      } else {
        EXPECT_GT(r.stats[rank][s].grad_norm, 0.0) << s;
        EXPECT_LT(r.stats[rank][s].grad_norm, 100.0) << s << ": still scaled by 65536?";
        EXPECT_EQ(r.stats[rank][s].grad_norm, r.stats[0][s].grad_norm) << s;
      }
    }
  }
  EXPECT_EQ(r.all_params[0], r.all_params[1]);
  // The skipped step changed nothing: 3 real steps + skip == 3 real steps.
  TrainerOptions no_inject = o;
  no_inject.inject_overflow_step = -1;
  RunResult three = Train(no_inject, data_, 2, 3);
  RunResult four = Train(o, data_, 2, 4);
  EXPECT_EQ(three.params, four.params);
}

TEST_F(TrainerTest, StateExportsParamsOptimizerStateAndCursor) {
  TrainerOptions o = SmallOptions();
  o.optimizer.kind = "adamw";
  auto trainer = Trainer::Create(o, &data_, nullptr);
  ASSERT_TRUE(trainer.ok());
  ASSERT_TRUE((*trainer)->Step().ok());
  std::vector<NamedTensor> state = (*trainer)->StateTensors();
  ASSERT_EQ(state.size(), 3u * 7);  // 7 parameters x (param, exp_avg, exp_avg_sq)
  EXPECT_EQ(state[0].name, "param.out.weight");
  EXPECT_EQ(state[7].name, "exp_avg.out.weight");
  EXPECT_EQ(state[20].name, "exp_avg_sq.embed.weight");
  EXPECT_EQ((*trainer)->StateMetadata().at("data_cursor"), "1");
  EXPECT_EQ((*trainer)->StateMetadata().at("loss_scale"), "1");
}

TEST_F(TrainerTest, CudaDeviceTrainsLikeCpu) {
  std::string why;
  if (!CudaMatMulAvailable(&why)) GTEST_SKIP() << "skipping the cuBLAS training test: " << why;
  TrainerOptions cpu = SmallOptions(), gpu = SmallOptions();
  gpu.device = "cuda";
  RunResult a = Train(cpu, data_, 1, 10), b = Train(gpu, data_, 1, 10);
  EXPECT_LE(MaxDiff(a.params, b.params), 1e-5 * MaxAbs(a.params));
  EXPECT_EQ(Train(gpu, data_, 1, 10).params, b.params);  // deterministic on the GPU too
}

std::map<std::string, std::vector<float>> Copy(const std::vector<NamedTensor>& views) {
  std::map<std::string, std::vector<float>> out;
  for (const NamedTensor& t : views) out[t.name].assign(t.data, t.data + t.size);
  return out;
}

TEST_F(TrainerTest, ResumingFromExportedStateIsBitwiseIdentical) {
  TrainerOptions o = SmallOptions();
  o.optimizer.kind = "adamw";
  o.optimizer.lr = 3e-3f;
  o.precision = Precision::kF16;  // the loss scaler's state travels too
  o.clip_grad_norm = 0.05f;       // low enough to clip every step
  auto straight = Trainer::Create(o, &data_, nullptr);
  auto first = Trainer::Create(o, &data_, nullptr);
  auto second = Trainer::Create(o, &data_, nullptr);
  ASSERT_TRUE(straight.ok() && first.ok() && second.ok());
  for (int s = 0; s < 6; ++s) {
    absl::StatusOr<StepStats> st = (*straight)->Step();
    ASSERT_TRUE(st.ok());
    EXPECT_GT(st->grad_norm, o.clip_grad_norm) << "step " << s << " was not clipped";
  }
  for (int s = 0; s < 3; ++s) ASSERT_TRUE((*first)->Step().ok());
  ASSERT_TRUE((*second)->LoadState(Copy((*first)->StateTensors()), (*first)->StateMetadata()).ok());
  EXPECT_EQ((*second)->step(), 3);
  for (int s = 0; s < 3; ++s) ASSERT_TRUE((*second)->Step().ok());
  EXPECT_EQ((*second)->params(), (*straight)->params());
  EXPECT_EQ((*second)->StateMetadata(), (*straight)->StateMetadata());

  TrainerOptions other = o;
  other.seed = 99;
  auto wrong = Trainer::Create(other, &data_, nullptr);
  ASSERT_TRUE(wrong.ok());
  absl::Status s = (*wrong)->LoadState(Copy((*first)->StateTensors()), (*first)->StateMetadata());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "state has seed=11 but this run has seed=99");
  auto partial = Copy((*first)->StateTensors());
  partial.erase("exp_avg.hidden.0.bias");
  s = (*second)->LoadState(partial, (*first)->StateMetadata());
  EXPECT_EQ(s.message(),
            "state tensor 'exp_avg.hidden.0.bias' is missing or has 0 values, want 32");
}

TEST_F(TrainerTest, ClippingScalesTheMeanGradientToTheLimit) {
  // One SGD step from zero momentum moves the weights by -lr * (clipped) gradient.
  TrainerOptions off = SmallOptions();
  off.clip_grad_norm = 0.0f;
  TrainerOptions on = SmallOptions();
  on.clip_grad_norm = 0.1f;
  RunResult init = Train(off, data_, 1, 0), free = Train(off, data_, 1, 1),
            clipped = Train(on, data_, 1, 1);
  EXPECT_EQ(free.stats[0][0].grad_norm, 0.0);  // off: not computed
  const double norm = clipped.stats[0][0].grad_norm;
  ASSERT_GT(norm, 0.1);
  double free_sq = 0, clipped_sq = 0;
  for (size_t i = 0; i < init.params.size(); ++i) {
    const double f = (static_cast<double>(free.params[i]) - init.params[i]) / off.optimizer.lr;
    const double c = (static_cast<double>(clipped.params[i]) - init.params[i]) / on.optimizer.lr;
    free_sq += f * f;
    clipped_sq += c * c;
    EXPECT_NEAR(c, f * 0.1 / norm, 1e-4 * std::abs(f) + 1e-6) << i;
  }
  EXPECT_NEAR(std::sqrt(free_sq), norm, 1e-3 * norm);  // the norm is the unclipped gradient's
  EXPECT_NEAR(std::sqrt(clipped_sq), 0.1, 1e-3);
}

TEST_F(TrainerTest, ClippingIsIdenticalOnEveryRankAndAcrossFactorisations) {
  // Global batch 24 as 3 ranks x 4 x accum 2 and as 1 rank x 8 x accum 3.
  TrainerOptions three = SmallOptions();
  three.clip_grad_norm = 0.1f;
  three.micro_batch = 4;
  three.accum = 2;
  TrainerOptions one = three;
  one.micro_batch = 8;
  one.accum = 3;
  RunResult a = Train(three, data_, 3, 20), b = Train(one, data_, 1, 20);
  for (int s = 0; s < 20; ++s) {
    EXPECT_GT(a.stats[0][s].grad_norm, 0.1) << "step " << s << " was not clipped";
    EXPECT_EQ(a.stats[1][s].grad_norm, a.stats[0][s].grad_norm) << s;
    EXPECT_EQ(a.stats[2][s].grad_norm, a.stats[0][s].grad_norm) << s;
    EXPECT_NEAR(a.stats[0][s].grad_norm, b.stats[0][s].grad_norm, 1e-5 * b.stats[0][s].grad_norm);
  }
  EXPECT_EQ(a.all_params[0], a.all_params[1]);
  EXPECT_EQ(a.all_params[0], a.all_params[2]);
  const double scale = MaxAbs(b.params);
  EXPECT_LE(MaxDiff(a.params, b.params), 1e-5 * scale);
  TrainerOptions unclipped = one;
  unclipped.clip_grad_norm = 0.0f;
  EXPECT_GT(MaxDiff(Train(unclipped, data_, 1, 20).params, b.params), 1e-3 * scale);
}

TEST_F(TrainerTest, AStopVoteEndsEveryRankAfterTheSameStep) {
  ThreadWorld tw(3);
  std::vector<std::vector<bool>> stops(3);
  auto body = [&](int rank) {
    std::unique_ptr<Communicator> comm = tw.Join(rank);
    auto trainer = Trainer::Create(SmallOptions(), &data_, comm.get());
    ASSERT_TRUE(trainer.ok());
    for (int s = 0; s < 4; ++s) {
      auto st = (*trainer)->Step(/*stop_requested=*/rank == 2 && s == 2);
      ASSERT_TRUE(st.ok());
      stops[rank].push_back(st->stop);
    }
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) threads.emplace_back(body, r);
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < 3; ++r) EXPECT_EQ(stops[r], (std::vector<bool>{false, false, true, false}));
}

TEST_F(TrainerTest, RejectsBadOptions) {
  TrainerOptions o = SmallOptions();
  o.accum = 0;
  EXPECT_EQ(Trainer::Create(o, &data_, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  o = SmallOptions();
  o.inject_overflow_step = 2;  // fp32
  EXPECT_EQ(Trainer::Create(o, &data_, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  o = SmallOptions();
  o.model.context = 5;  // dataset built for 4
  EXPECT_EQ(Trainer::Create(o, &data_, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  o = SmallOptions();
  o.clip_grad_norm = -1.0f;
  EXPECT_EQ(Trainer::Create(o, &data_, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  o = SmallOptions();
  o.device = "abacus";
  EXPECT_EQ(Trainer::Create(o, &data_, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace athanor
