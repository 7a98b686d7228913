#include "worker/train/state_file.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/training_state.h"
#include "common/status.h"

namespace athanor {

absl::Status WriteSafetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  std::vector<TensorRef> refs;
  for (const NamedTensor& t : tensors) {
    TensorRef r;
    r.name = t.name;
    r.dtype = TensorDType::kF32;
    r.shape = t.shape;
    r.data = const_cast<float*>(t.data);  // only read
    r.bytes = t.size * sizeof(float);
    refs.push_back(std::move(r));
  }
  ASSIGN_OR_RETURN(SafetensorsLayout layout, PlanSafetensors(refs, metadata));
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return ErrnoStatus("open " + tmp);
  bool ok = std::fwrite(layout.header.data(), 1, layout.header.size(), f) == layout.header.size();
  for (const TensorRef& r : refs) {  // contiguous, in order: the layout's promise
    if (!ok) break;
    ok = std::fwrite(r.data, 1, r.bytes, f) == r.bytes;  // host is little-endian
  }
  const int err = errno;
  if (std::fclose(f) != 0 || !ok) return ErrnoStatus("write " + tmp, ok ? errno : err);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return ErrnoStatus("rename to " + path);
  return absl::OkStatus();
}

absl::Status ReadSafetensors(const std::string& path,
                             std::map<std::string, std::vector<float>>* tensors,
                             std::map<std::string, std::string>* metadata) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError("cannot open " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string all = ss.str();
  absl::StatusOr<SafetensorsLayout> parsed = ParseSafetensors(all, all.size());
  if (!parsed.ok()) return Annotate(parsed.status(), path);
  const SafetensorsLayout& layout = *parsed;
  for (const SafetensorsEntry& e : layout.entries) {
    if (e.dtype != TensorDType::kF32) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor ", e.name, " is ", DTypeName(e.dtype), ", not F32"));
    }
    std::vector<float> v((e.end - e.begin) / sizeof(float));
    if (!v.empty()) std::memcpy(v.data(), all.data() + layout.data_start + e.begin, e.end - e.begin);
    (*tensors)[e.name] = std::move(v);
  }
  if (metadata != nullptr) {
    for (const auto& [k, v] : layout.metadata) (*metadata)[k] = v;
  }
  return absl::OkStatus();
}

}  // namespace athanor
