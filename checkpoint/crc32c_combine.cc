#include "checkpoint/crc32c_combine.h"

namespace athanor {
namespace {

// Appending n zero bits to the (register) CRC is linear over GF(2): build the
// 32x32 operator for one zero bit, square it up to the needed powers.
uint32_t Times(const uint32_t* mat, uint32_t vec) {
  uint32_t sum = 0;
  for (; vec != 0; vec >>= 1, ++mat) {
    if (vec & 1) sum ^= *mat;
  }
  return sum;
}

void Square(uint32_t* square, const uint32_t* mat) {
  for (int n = 0; n < 32; ++n) square[n] = Times(mat, mat[n]);
}

}  // namespace

uint32_t Crc32cCombine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) {
  if (len_b == 0) return crc_a;
  uint32_t even[32];
  uint32_t odd[32];
  odd[0] = 0x82F63B78u;  // reflected Castagnoli polynomial
  uint32_t row = 1;
  for (int n = 1; n < 32; ++n, row <<= 1) odd[n] = row;
  Square(even, odd);  // two zero bits
  Square(odd, even);  // four zero bits
  // Each round applies len_b's next bit, in units of one zero byte upward.
  while (true) {
    Square(even, odd);
    if (len_b & 1) crc_a = Times(even, crc_a);
    len_b >>= 1;
    if (len_b == 0) break;
    Square(odd, even);
    if (len_b & 1) crc_a = Times(odd, crc_a);
    len_b >>= 1;
    if (len_b == 0) break;
  }
  return crc_a ^ crc_b;
}

}  // namespace athanor
