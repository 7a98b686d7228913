#include "coordinator/health/oom_advice.h"

#include <cstdint>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace athanor::coord {
namespace {

// athanor-train's defaults (worker/train/train_flags.cc).
constexpr int64_t kTrainMicroBatch = 8;
constexpr int64_t kTrainAccum = 1;

bool IsTrain(const std::string& arg) {
  return arg == "athanor-train" || absl::EndsWith(arg, "/athanor-train");
}

// The value of `--name V` or `--name=V` in args (the last one wins, as with
// the trainer's parser); nullopt when absent or not a positive integer.
std::optional<int64_t> IntFlag(const std::vector<std::string>& args, size_t from,
                               const std::string& name) {
  std::optional<int64_t> out;
  const std::string flag = "--" + name;
  for (size_t i = from; i < args.size(); ++i) {
    std::string value;
    if (args[i] == flag && i + 1 < args.size()) {
      value = args[i + 1];
    } else if (absl::StartsWith(args[i], flag + "=")) {
      value = args[i].substr(flag.size() + 1);
    } else {
      continue;
    }
    int64_t v = 0;
    out = absl::SimpleAtoi(value, &v) && v > 0 ? std::optional<int64_t>(v) : std::nullopt;
  }
  return out;
}

std::string StringFlag(const std::vector<std::string>& args, size_t from, const std::string& name) {
  std::string out;
  const std::string flag = "--" + name;
  for (size_t i = from; i < args.size(); ++i) {
    if (args[i] == flag && i + 1 < args.size()) out = args[i + 1];
    if (absl::StartsWith(args[i], flag + "=")) out = args[i].substr(flag.size() + 1);
  }
  return out;
}

// The smallest factor > 1 of n (n itself when prime).
int64_t SmallestFactor(int64_t n) {
  for (int64_t f = 2; f * f <= n; ++f) {
    if (n % f == 0) return f;
  }
  return n;
}

}  // namespace

bool SaysOutOfMemory(const std::string& message) {
  return absl::StrContains(absl::AsciiStrToLower(message), "out of memory") ||
         absl::StrContains(message, "cudaErrorMemoryAllocation");
}

std::string OomAdvice(const std::vector<std::string>& command) {
  size_t train = command.size();
  for (size_t i = 0; i < command.size(); ++i) {
    if (IsTrain(command[i])) {
      train = i;
      break;
    }
  }
  std::vector<std::string> tries;
  if (train < command.size()) {
    // A bad value would have stopped the trainer before it ran; the defaults stand in.
    const int64_t mb = IntFlag(command, train + 1, "micro-batch").value_or(kTrainMicroBatch);
    const int64_t accum = IntFlag(command, train + 1, "accum").value_or(kTrainAccum);
    if (mb > 1) {
      const int64_t f = SmallestFactor(mb);
      tries.push_back(absl::StrCat("a smaller micro-batch with more accumulation steps for the same "
                                   "global batch: --micro-batch ", mb / f, " --accum ", accum * f,
                                   " (was --micro-batch ", mb, " --accum ", accum, ")"));
    }
    const std::string precision = StringFlag(command, train + 1, "precision");
    if (precision != "bf16" && precision != "fp16") tries.push_back("--precision bf16");
  } else {
    tries.push_back("a smaller micro-batch with more gradient accumulation steps for the same global batch");
    tries.push_back("bf16 instead of fp32");
    tries.push_back("activation checkpointing where the framework has it (e.g. torch.utils.checkpoint)");
  }
  tries.push_back("for inference, 8-bit or 4-bit quantisation");
  tries.push_back("or more memory per node (--memory-per-node)");
  return absl::StrCat("try ", absl::StrJoin(tries, "; "));
}

std::string OomAdviceFor(const JobRecord& job) {
  for (const RankStatus& st : job.ranks) {
    if (st.exited && SaysOutOfMemory(st.message)) return OomAdvice(job.spec.command);
  }
  return "";
}

}  // namespace athanor::coord
