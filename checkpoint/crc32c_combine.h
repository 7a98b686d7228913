// CRC32C of a concatenation from the CRCs of its parts, so a shard's CRC is
// derived from its tensors' CRCs without a second pass over the bytes.
// Pure; thread-safe. Values are those of common/crc32c.h.
#pragma once

#include <cstdint>

namespace athanor {

// crc32c::Value(A + B) given crc_a = Value(A), crc_b = Value(B), len_b = |B|.
uint32_t Crc32cCombine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

}  // namespace athanor
