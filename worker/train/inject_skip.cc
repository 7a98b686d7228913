#include "worker/train/inject_skip.h"

#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"

namespace athanor {
namespace {

constexpr char kVariable[] = "ATHANOR_TEST_SKIP_ALLREDUCE";

// A Work that is already done.
class DoneWork : public Work {
 public:
  absl::Status Wait(std::chrono::milliseconds) override { return absl::OkStatus(); }
  bool Done() override { return true; }
};

}  // namespace

absl::StatusOr<SkipPlan> ParseSkipPlan(const std::string& spec) {
  SkipPlan p;
  if (spec.empty()) return p;
  std::vector<std::string> parts = absl::StrSplit(spec, ':');
  const bool ok = (parts.size() == 2 || parts.size() == 3) && absl::SimpleAtoi(parts[0], &p.rank) &&
                  absl::SimpleAtoi(parts[1], &p.step) &&
                  (parts.size() == 2 || absl::SimpleAtoi(parts[2], &p.attempt)) && p.rank >= 0 &&
                  p.step >= 0 && p.attempt >= 1;
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        kVariable, " expects RANK:STEP[:ATTEMPT] (RANK >= 0, STEP >= 0, ATTEMPT >= 1), not '", spec,
        "'"));
  }
  return p;
}

absl::StatusOr<SkipPlan> SkipPlanFromEnv(const EnvLookup& env) {
  return ParseSkipPlan(env(kVariable).value_or(""));
}

std::unique_ptr<Work> SkipAllReduceCommunicator::AllReduceAsync(const void* send, void* recv,
                                                                size_t count, DataType type,
                                                                ReduceOp op,
                                                                const CollectiveOptions& options) {
  if (step_.load(std::memory_order_relaxed) == plan_.step && !fired_.exchange(true)) {
    ATHANOR_LOG(WARNING) << "test hook " << kVariable << ": rank " << inner_->rank()
                         << " skips the all-reduce of tag " << options.tag << " in step "
                         << plan_.step;
    if (send != recv) std::memcpy(recv, send, count * DataTypeSize(type));
    return std::make_unique<DoneWork>();
  }
  return inner_->AllReduceAsync(send, recv, count, type, op, options);
}

}  // namespace athanor
