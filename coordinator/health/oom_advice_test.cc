// oom_advice: which exits mean out of memory, and the exact advice.
#include "coordinator/health/oom_advice.h"

#include <gtest/gtest.h>

namespace athanor::coord {
namespace {

TEST(OomAdviceTest, RecognisesTheAgentsAndCudasWords) {
  EXPECT_TRUE(SaysOutOfMemory("out of memory"));
  EXPECT_TRUE(SaysOutOfMemory("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"));
  EXPECT_TRUE(SaysOutOfMemory("cudaErrorMemoryAllocation"));
  EXPECT_FALSE(SaysOutOfMemory("killed by signal 9"));
  EXPECT_FALSE(SaysOutOfMemory(""));
}

TEST(OomAdviceTest, TrainGetsHalfTheMicroBatchAndTwiceTheAccumulation) {
  EXPECT_EQ(OomAdvice({"/usr/bin/athanor-train", "--steps", "10", "--micro-batch", "32", "--accum", "1"}),
            "try a smaller micro-batch with more accumulation steps for the same global "
            "batch: --micro-batch 16 --accum 2 (was --micro-batch 32 --accum 1); --precision bf16; "
            "for inference, 8-bit or 4-bit quantisation; or more memory per node (--memory-per-node)");
}

TEST(OomAdviceTest, TrainDefaultsOddSizesAndBf16) {
  // No flags: athanor-train's defaults (8, 1).
  EXPECT_EQ(OomAdvice({"athanor-train", "--precision=bf16"}),
            "try a smaller micro-batch with more accumulation steps for the same global "
            "batch: --micro-batch 4 --accum 2 (was --micro-batch 8 --accum 1); "
            "for inference, 8-bit or 4-bit quantisation; or more memory per node (--memory-per-node)");
  // 9 = 3 x 3: a third of it, three times the accumulation.
  EXPECT_EQ(OomAdvice({"athanor-train", "--micro-batch=9", "--accum=2", "--precision", "fp16"}),
            "try a smaller micro-batch with more accumulation steps for the same global "
            "batch: --micro-batch 3 --accum 6 (was --micro-batch 9 --accum 2); "
            "for inference, 8-bit or 4-bit quantisation; or more memory per node (--memory-per-node)");
  // Already 1: nothing to split.
  EXPECT_EQ(OomAdvice({"athanor-train", "--micro-batch", "1"}),
            "try --precision bf16; for inference, 8-bit or 4-bit quantisation; "
            "or more memory per node (--memory-per-node)");
}

TEST(OomAdviceTest, OtherProgramsGetTheGeneralAdvice) {
  EXPECT_EQ(OomAdvice({"python3", "train.py"}),
            "try a smaller micro-batch with more gradient accumulation steps for the "
            "same global batch; bf16 instead of fp32; activation checkpointing where the framework "
            "has it (e.g. torch.utils.checkpoint); for inference, 8-bit or 4-bit quantisation; or "
            "more memory per node (--memory-per-node)");
}

TEST(OomAdviceTest, OnlyAnAttemptWithAnOomRankGetsAdvice) {
  JobRecord job;
  job.spec.command = {"athanor-train", "--micro-batch", "2"};
  job.ranks = {RankStatus{0, true, true, 1, 0, "connection reset"},
               RankStatus{1, true, true, 137, 9, "out of memory"}};
  EXPECT_EQ(OomAdviceFor(job),
            "try a smaller micro-batch with more accumulation steps for the same global "
            "batch: --micro-batch 1 --accum 2 (was --micro-batch 2 --accum 1); --precision bf16; "
            "for inference, 8-bit or 4-bit quantisation; or more memory per node (--memory-per-node)");
  job.ranks[1].message = "";
  EXPECT_EQ(OomAdviceFor(job), "");
}

}  // namespace
}  // namespace athanor::coord
