// CRC32C (Castagnoli), as used by checkpoint manifests and COMMIT records.
// Uses the SSE4.2 crc32 instruction when the CPU has it, a table otherwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace athanor::crc32c {

// Extends `crc` (the CRC of earlier bytes; 0 to start) over data[0, n).
uint32_t Extend(uint32_t crc, const void* data, size_t n);

inline uint32_t Value(const void* data, size_t n) { return Extend(0, data, n); }

// Value(A + B) from crc_a = Value(A), crc_b = Value(B) and len_b = |B|, without
// touching the bytes (a shard's CRC from its tensors' CRCs).
uint32_t Combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);
inline uint32_t Value(std::string_view s) { return Extend(0, s.data(), s.size()); }

}  // namespace athanor::crc32c
