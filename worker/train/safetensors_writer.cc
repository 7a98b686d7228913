#include "worker/train/safetensors_writer.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/status.h"

namespace athanor {

absl::Status WriteSafetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header;
  size_t offset = 0;
  for (const NamedTensor& t : tensors) {
    const size_t bytes = t.size * sizeof(float);
    header[t.name] = {
        {"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  header["__metadata__"] = metadata;
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  const uint64_t n = json.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));

  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return ErrnoStatus("open " + tmp);
  bool ok = std::fwrite(len, 1, 8, f) == 8 && std::fwrite(json.data(), 1, n, f) == n;
  for (const NamedTensor& t : tensors) {
    if (!ok) break;
    ok = std::fwrite(t.data, sizeof(float), t.size, f) == t.size;  // host is little-endian
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
  if (all.size() < 8) return absl::InvalidArgumentError(path + ": shorter than 8 bytes");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= static_cast<uint64_t>(static_cast<unsigned char>(all[i])) << (8 * i);
  if (8 + n > all.size()) return absl::InvalidArgumentError(path + ": header past end of file");
  nlohmann::json header = nlohmann::json::parse(all.substr(8, n), nullptr, false);
  if (header.is_discarded()) return absl::InvalidArgumentError(path + ": header is not JSON");
  const size_t base = 8 + n;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (metadata == nullptr) continue;
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        if (m.value().is_string()) (*metadata)[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const auto& off = it.value()["data_offsets"];
    const size_t b = off[0].get<size_t>(), e = off[1].get<size_t>();
    if (it.value()["dtype"] != "F32" || b > e || base + e > all.size() || (e - b) % 4 != 0) {
      return absl::InvalidArgumentError(path + ": bad entry " + it.key());
    }
    std::vector<float> v((e - b) / 4);
    std::memcpy(v.data(), all.data() + base + b, e - b);
    (*tensors)[it.key()] = std::move(v);
  }
  return absl::OkStatus();
}

}  // namespace athanor
