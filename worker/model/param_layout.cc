#include "worker/model/param_layout.h"

#include <utility>

namespace athanor {

int ParamLayout::Add(std::string name, std::vector<int64_t> shape) {
  ParamInfo info;
  info.name = std::move(name);
  info.size = 1;
  for (int64_t d : shape) info.size *= static_cast<size_t>(d);
  info.shape = std::move(shape);
  info.offset = total_;
  total_ += info.size;
  params_.push_back(std::move(info));
  return static_cast<int>(params_.size()) - 1;
}

std::vector<NamedTensor> NamedViews(const ParamLayout& layout, const float* buffer,
                                    const std::string& prefix) {
  std::vector<NamedTensor> out;
  for (const ParamInfo& p : layout.params()) {
    out.push_back(NamedTensor{prefix + p.name, p.shape, buffer + p.offset, p.size});
  }
  return out;
}

}  // namespace athanor
