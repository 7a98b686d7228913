// Fuzzes the safetensors header parser and the shard reader's checks: any
// bytes as a whole file.
#include <cstddef>
#include <cstdint>

#include "checkpoint/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view file(reinterpret_cast<const char*>(data), size);
  auto layout = athanor::ParseSafetensors(file, size);
  if (!layout.ok()) return 0;
  // What a reader then does with an accepted layout: every range lies in the
  // file and the ranges are disjoint.
  uint64_t prev_end = 0;
  for (const athanor::SafetensorsEntry& e : layout->entries) {
    if (e.begin < prev_end || e.end < e.begin || layout->data_start + e.end > size) __builtin_trap();
    prev_end = e.end;
    volatile char sink = 0;
    for (uint64_t i = e.begin; i < e.end; i += 4096) sink = file[layout->data_start + i];
    (void)sink;
  }
  return 0;
}
