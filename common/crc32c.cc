#include "common/crc32c.h"

#include <array>
#include <cstring>

namespace athanor::crc32c {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // reflected Castagnoli polynomial

constexpr std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
    table[i] = c;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kTable = MakeTable();

// Multiplies two polynomials modulo the CRC polynomial, in the reflected bit
// order CRC registers use (bit 31 is x^0).
uint32_t MultiplyModP(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (int i = 0; i < 32; ++i) {
    if (a & 0x80000000u) product ^= b;
    a <<= 1;
    b = (b & 1) ? (b >> 1) ^ kPoly : b >> 1;
  }
  return product;
}

// x^(8 * bytes) modulo the CRC polynomial: what appending `bytes` zero bytes
// multiplies a raw CRC register by.
uint32_t ShiftFactor(uint64_t bytes) {
  uint32_t result = 0x80000000u;  // 1
  uint32_t power = 0x00800000u;   // x^8
  for (; bytes != 0; bytes >>= 1) {
    if (bytes & 1) result = MultiplyModP(result, power);
    power = MultiplyModP(power, power);
  }
  return result;
}

uint32_t ExtendPortable(uint32_t crc, const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) crc = kTable[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t ExtendHardware(uint32_t crc, const uint8_t* p,
                                                           size_t n) {
  uint64_t c = crc;
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = __builtin_ia32_crc32di(c, word);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (n > 0) {
    c32 = __builtin_ia32_crc32qi(c32, *p++);
    --n;
  }
  return c32;
}

// Large buffers run three independent crc32 chains over three thirds of the
// data (the instruction's latency is three times its throughput), then join
// them: the raw register after A·B is shift(reg(A), |B|) ^ reg(B from 0).
constexpr size_t kInterleaveMin = 64 * 1024;

__attribute__((target("sse4.2"))) uint32_t ExtendHardware3(uint32_t crc, const uint8_t* p,
                                                            size_t n) {
  const size_t block = (n / 3) & ~static_cast<size_t>(7);
  uint64_t c0 = crc, c1 = 0, c2 = 0;
  const uint8_t* a = p;
  const uint8_t* b = p + block;
  const uint8_t* c = p + 2 * block;
  for (size_t i = 0; i < block; i += 8) {
    uint64_t wa, wb, wc;
    std::memcpy(&wa, a + i, 8);
    std::memcpy(&wb, b + i, 8);
    std::memcpy(&wc, c + i, 8);
    c0 = __builtin_ia32_crc32di(c0, wa);
    c1 = __builtin_ia32_crc32di(c1, wb);
    c2 = __builtin_ia32_crc32di(c2, wc);
  }
  const uint32_t shift = ShiftFactor(block);
  uint32_t joined = MultiplyModP(static_cast<uint32_t>(c0), shift) ^ static_cast<uint32_t>(c1);
  joined = MultiplyModP(joined, shift) ^ static_cast<uint32_t>(c2);
  return ExtendHardware(joined, p + 3 * block, n - 3 * block);
}

bool HaveHardware() {
  static const bool have = __builtin_cpu_supports("sse4.2");
  return have;
}
#endif

}  // namespace

uint32_t Extend(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  crc = ~crc;
#if defined(__x86_64__)
  if (HaveHardware()) {
    return ~(n >= kInterleaveMin ? ExtendHardware3(crc, p, n) : ExtendHardware(crc, p, n));
  }
#endif
  return ~ExtendPortable(crc, p, n);
}

uint32_t Combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) {
  // The pre- and post-inversions cancel out: shifting Value(A) by |B| zero
  // bytes and adding Value(B) gives Value(A + B).
  return MultiplyModP(crc_a, ShiftFactor(len_b)) ^ crc_b;
}

}  // namespace athanor::crc32c
