#include "worker/train/testing/recording_communicator.h"

#include <cstring>

#include "worker/model/half.h"

namespace athanor {
namespace {

class DoneWork final : public Work {
 public:
  absl::Status Wait(std::chrono::milliseconds) override { return absl::OkStatus(); }
  bool Done() override { return true; }
};

}  // namespace

std::unique_ptr<Work> RecordingCommunicator::AllReduceAsync(const void* send, void* recv,
                                                            size_t count, DataType type,
                                                            ReduceOp op,
                                                            const CollectiveOptions& options) {
  Call call{options.tag, count, type, op, send};
  calls_.push_back(call);
  if (on_call) on_call(call);
  const float factor = op == ReduceOp::kSum ? static_cast<float>(world_size_) : 1.0f;
  for (size_t i = 0; i < count; ++i) {
    if (type == DataType::kF32) {
      static_cast<float*>(recv)[i] = static_cast<const float*>(send)[i] * factor;
    } else {
      const Precision p = type == DataType::kBF16 ? Precision::kBF16 : Precision::kF16;
      float v;
      UnpackHalf(p, static_cast<const uint16_t*>(send) + i, &v, 1);
      v *= factor;
      PackHalf(p, &v, static_cast<uint16_t*>(recv) + i, 1);
    }
  }
  return std::make_unique<DoneWork>();
}

}  // namespace athanor
