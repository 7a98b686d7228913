// Named views into one flat f32 buffer of parameters (or gradients, or
// optimizer state with the same shape).
//
// Every parameter lives at a fixed offset of a single contiguous buffer so
// gradients can be bucketed and all-reduced without copies. Value type;
// immutable after construction; thread-safe to read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace athanor {

struct ParamInfo {
  std::string name;            // e.g. "out.weight"
  std::vector<int64_t> shape;  // row-major
  size_t offset = 0;           // in elements, into the flat buffer
  size_t size = 0;             // elements
};

class ParamLayout {
 public:
  // Appends a parameter right after the previous one; returns its index.
  int Add(std::string name, std::vector<int64_t> shape);

  const std::vector<ParamInfo>& params() const { return params_; }
  const ParamInfo& param(int i) const { return params_[i]; }
  size_t total() const { return total_; }

 private:
  std::vector<ParamInfo> params_;
  size_t total_ = 0;
};

// A named tensor handed to checkpointing / weight dumps: a view, not a copy.
struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;  // not owned; `size` f32 values
  size_t size = 0;
};

// Views of `buffer` (laid out as `layout`) with each name prefixed by `prefix`.
std::vector<NamedTensor> NamedViews(const ParamLayout& layout, const float* buffer,
                                    const std::string& prefix = "");

}  // namespace athanor
