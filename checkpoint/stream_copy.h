// StreamCopy: memcpy for checkpoint staging. The bytes copied into a staging
// buffer are read next by an uploader, not by the copying core, so large
// copies are written with non-temporal (streaming) stores: no read of each
// destination line before it is written, and the trainer's cache is not
// flushed by state it will not touch again. glibc's memcpy makes that choice
// only above its non-temporal threshold (three quarters of the shared cache,
// 240 MiB on a VM reporting a 320 MiB L3), which no single tensor of a
// typical shard reaches. Below kStreamCopyMinBytes, off x86-64, or built
// with ATHANOR_SIMD=OFF, it is plain memcpy.
#pragma once

#include <cstddef>

namespace athanor {

inline constexpr size_t kStreamCopyMinBytes = size_t{1} << 20;

// Copies `n` bytes from `src` to `dst` (which must not overlap). The bytes
// are visible to other threads once it returns, as after memcpy.
void StreamCopy(void* dst, const void* src, size_t n);

}  // namespace athanor
