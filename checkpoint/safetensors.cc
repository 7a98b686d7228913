#include "checkpoint/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace athanor {

using nlohmann::json;

absl::StatusOr<SafetensorsLayout> PlanSafetensors(
    const std::vector<TensorRef>& tensors, const std::map<std::string, std::string>& metadata) {
  SafetensorsLayout layout;
  layout.metadata = metadata;
  json header = json::object();
  json meta = json::object();
  for (const auto& [k, v] : metadata) meta[k] = v;
  header["__metadata__"] = meta;
  uint64_t offset = 0;
  for (const TensorRef& t : tensors) {
    SafetensorsEntry e{t.name, t.dtype, t.shape, offset, offset + t.bytes};
    offset += t.bytes;
    header[t.name] = {{"dtype", DTypeName(t.dtype)}, {"shape", t.shape},
                      {"data_offsets", {e.begin, e.end}}};
    layout.entries.push_back(std::move(e));
  }
  std::string text = header.dump(-1, ' ', false, json::error_handler_t::replace);
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');
  layout.header.resize(8);
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) layout.header[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  layout.header += text;
  layout.data_start = layout.header.size();
  layout.total_size = layout.data_start + offset;
  return layout;
}

absl::StatusOr<uint64_t> SafetensorsHeaderLength(absl::string_view first8, uint64_t max_header) {
  if (first8.size() < 8) return absl::DataLossError("safetensors file shorter than 8 bytes");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(first8[i]);
  if (n > max_header) {
    return absl::DataLossError(absl::StrCat("safetensors header length ", n, " is implausible"));
  }
  return n;
}

absl::StatusOr<SafetensorsLayout> ParseSafetensors(absl::string_view bytes, uint64_t file_size) {
  ASSIGN_OR_RETURN(uint64_t n, SafetensorsHeaderLength(bytes));
  if (bytes.size() < 8 + n || file_size < 8 + n) {
    return absl::DataLossError("safetensors header runs past the end of the file");
  }
  SafetensorsLayout layout;
  layout.header = std::string(bytes.substr(0, 8 + n));
  layout.data_start = 8 + n;
  layout.total_size = file_size;
  json header = json::parse(bytes.substr(8, n).begin(), bytes.substr(8, n).end(), nullptr,
                            /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) {
    return absl::DataLossError("safetensors header is not a JSON object");
  }
  uint64_t data_size = file_size - layout.data_start;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const json& v = it.value();
    if (it.key() == "__metadata__") {
      if (!v.is_object()) return absl::DataLossError("__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) return absl::DataLossError("__metadata__ value is not a string");
        layout.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
        !v.contains("data_offsets") || !v["dtype"].is_string() || !v["shape"].is_array() ||
        !v["data_offsets"].is_array() || v["data_offsets"].size() != 2) {
      return absl::DataLossError(absl::StrCat("tensor '", it.key(), "' has a malformed entry"));
    }
    SafetensorsEntry e;
    e.name = it.key();
    ASSIGN_OR_RETURN(e.dtype, ParseDTypeName(v["dtype"].get<std::string>()));
    // Bytes the shape needs, refusing dims past int64 and products past 64 bits.
    uint64_t need = DTypeSize(e.dtype);
    for (const json& d : v["shape"]) {
      if (!d.is_number_unsigned() ||
          d.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return absl::DataLossError(absl::StrCat("tensor '", e.name, "' has a bad dim"));
      }
      const uint64_t dim = d.get<uint64_t>();
      if (dim != 0 && need > std::numeric_limits<uint64_t>::max() / dim) {
        return absl::DataLossError(absl::StrCat("tensor '", e.name, "' has more elements than fit in 64 bits"));
      }
      e.shape.push_back(static_cast<int64_t>(dim));
      need *= dim;
    }
    if (!v["data_offsets"][0].is_number_unsigned() || !v["data_offsets"][1].is_number_unsigned()) {
      return absl::DataLossError(absl::StrCat("tensor '", e.name, "' has bad data_offsets"));
    }
    e.begin = v["data_offsets"][0].get<uint64_t>();
    e.end = v["data_offsets"][1].get<uint64_t>();
    if (e.begin > e.end || e.end > data_size || e.end - e.begin != need) {
      return absl::DataLossError(absl::StrCat("tensor '", e.name, "' offsets [", e.begin, ", ",
                                              e.end, ") disagree with its shape or the file size"));
    }
    layout.entries.push_back(std::move(e));
  }
  std::sort(layout.entries.begin(), layout.entries.end(),
            [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
              return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
            });
  for (size_t i = 1; i < layout.entries.size(); ++i) {
    if (layout.entries[i - 1].end > layout.entries[i].begin) {
      return absl::DataLossError(absl::StrCat("tensors '", layout.entries[i - 1].name, "' and '",
                                              layout.entries[i].name, "' overlap in the data section"));
    }
  }
  return layout;
}

}  // namespace athanor
