#include "collectives/ucx/schedule.h"

#include <algorithm>

namespace athanor {
namespace {

int Mod(int a, int n) { return ((a % n) + n) % n; }

// Splits `count` elements into n blocks as evenly as possible.
struct Blocks {
  Blocks(size_t count, int n) : base(count / n), extra(count % n) {}
  size_t Offset(int c) const { return c * base + std::min<size_t>(c, extra); }
  size_t Length(int c) const { return base + (static_cast<size_t>(c) < extra ? 1 : 0); }
  size_t base, extra;
};

// Elements [begin, end) of a block of `len` elements that chain j covers.
struct Seg {
  size_t begin, len;
};
Seg SegOf(size_t block_len, size_t seg_elems, size_t j) {
  size_t b = std::min(block_len, j * seg_elems);
  size_t e = std::min(block_len, b + seg_elems);
  return {b, e - b};
}

char* At(const void* base, size_t elems, size_t esz) {
  return static_cast<char*>(const_cast<void*>(base)) + elems * esz;
}

}  // namespace

size_t SegmentBytesFor(size_t block_bytes, const ScheduleParams& p) {
  size_t seg = p.segment_bytes;
  while (block_bytes / seg >= kMaxChains) seg *= 2;
  return seg;
}

size_t ScratchBytes(const ScheduleParams& p) { return static_cast<size_t>(p.window) * 2 * p.segment_bytes; }

Schedule RingAllReduce(const ScheduleParams& p, const void* send, void* recv, size_t count) {
  Schedule out;
  const int n = p.world_size, r = p.rank;
  const size_t esz = DataTypeSize(p.type);
  if (n == 1 && send != recv) {
    out.pre_copy_dst = recv, out.pre_copy_src = send, out.pre_copy_bytes = count * esz;
  }
  if (count == 0 || n == 1) return out;
  Blocks blocks(count, n);
  const size_t seg_elems = p.segment_bytes / esz;
  const size_t nchains = (blocks.Length(0) + seg_elems - 1) / seg_elems;
  const int left = Mod(r - 1, n), right = Mod(r + 1, n);
  // Out of place, a segment is received straight into its place in `recv`
  // and reduced there with `send` (no scratch pass); in place it would
  // overwrite our own contribution, so it goes through scratch.
  const char* sb = static_cast<const char*>(send);
  const char* rb = static_cast<const char*>(recv);
  const bool direct = !(sb < rb + count * esz && rb < sb + count * esz);
  out.chains.resize(nchains);
  for (size_t j = 0; j < nchains; ++j) {
    char* scratch = direct ? nullptr : p.scratch + (j % p.window) * 2 * p.segment_bytes;
    auto& steps = out.chains[j].steps;
    for (int s = 0; s < n - 1; ++s) {
      int cs = Mod(r - s - 1, n), cr = Mod(r - s - 2, n);
      Seg gs = SegOf(blocks.Length(cs), seg_elems, j), gr = SegOf(blocks.Length(cr), seg_elems, j);
      size_t os = blocks.Offset(cs) + gs.begin, orr = blocks.Offset(cr) + gr.begin;
      Step st;
      st.send_peer = right;
      st.send_buf = At(s == 0 ? send : recv, os, esz);
      st.send_bytes = gs.len * esz;
      st.recv_peer = left;
      st.recv_buf = direct ? At(recv, orr, esz) : scratch;
      st.recv_bytes = gr.len * esz;
      st.reduce_dst = At(recv, orr, esz);
      st.reduce_a = At(send, orr, esz);
      st.reduce_count = gr.len;
      if (s == n - 2 && p.op == ReduceOp::kAvg) st.scale_buf = st.reduce_dst, st.scale_count = gr.len;
      steps.push_back(st);
    }
    for (int t = 0; t < n - 1; ++t) {
      int cs = Mod(r - t, n), cr = Mod(r - t - 1, n);
      Seg gs = SegOf(blocks.Length(cs), seg_elems, j), gr = SegOf(blocks.Length(cr), seg_elems, j);
      Step st;
      st.send_peer = right;
      st.send_buf = At(recv, blocks.Offset(cs) + gs.begin, esz);
      st.send_bytes = gs.len * esz;
      st.recv_peer = left;
      st.recv_buf = At(recv, blocks.Offset(cr) + gr.begin, esz);
      st.recv_bytes = gr.len * esz;
      steps.push_back(st);
    }
  }
  return out;
}

Schedule RecursiveDoublingAllReduce(const ScheduleParams& p, const void* send, void* recv,
                                    size_t count) {
  Schedule out;
  const int n = p.world_size, r = p.rank;
  const size_t bytes = count * DataTypeSize(p.type);
  if (send != recv) out.pre_copy_dst = recv, out.pre_copy_src = send, out.pre_copy_bytes = bytes;
  if (count == 0 || n == 1) return out;
  int pof2 = 1;
  while (pof2 * 2 <= n) pof2 *= 2;
  const int rem = n - pof2;
  const bool avg = p.op == ReduceOp::kAvg;
  out.chains.resize(1);
  auto& steps = out.chains[0].steps;
  if (r >= pof2) {  // folded in: hand our data to the partner, get the result back
    Step give;
    give.msg = 0, give.send_peer = r - pof2, give.send_buf = recv, give.send_bytes = bytes;
    steps.push_back(give);
    Step take;
    take.msg = 1000, take.recv_peer = r - pof2, take.recv_buf = recv, take.recv_bytes = bytes;
    steps.push_back(take);
    return out;
  }
  if (r < rem) {
    Step fold;
    fold.msg = 0, fold.recv_peer = r + pof2, fold.recv_buf = p.scratch, fold.recv_bytes = bytes;
    fold.reduce_dst = recv, fold.reduce_a = recv, fold.reduce_count = count;
    steps.push_back(fold);
  }
  for (int mask = 1, k = 1; mask < pof2; mask <<= 1, ++k) {
    Step st;
    st.msg = k;
    st.send_peer = st.recv_peer = r ^ mask;
    st.send_buf = recv, st.send_bytes = bytes;
    st.recv_buf = p.scratch, st.recv_bytes = bytes;
    st.reduce_dst = recv, st.reduce_a = recv, st.reduce_count = count;
    if (mask * 2 == pof2 && avg) st.scale_buf = recv, st.scale_count = count;
    steps.push_back(st);
  }
  if (r < rem) {
    Step back;
    back.msg = 1000, back.send_peer = r + pof2, back.send_buf = recv, back.send_bytes = bytes;
    steps.push_back(back);
  }
  return out;
}

Schedule RingReduceScatter(const ScheduleParams& p, const void* send, void* recv,
                           size_t recv_count) {
  Schedule out;
  const int n = p.world_size, r = p.rank;
  const size_t esz = DataTypeSize(p.type);
  if (n == 1 && send != recv) {
    out.pre_copy_dst = recv, out.pre_copy_src = send, out.pre_copy_bytes = recv_count * esz;
  }
  if (recv_count == 0 || n == 1) return out;
  const size_t seg_elems = p.segment_bytes / esz;
  const size_t nchains = (recv_count + seg_elems - 1) / seg_elems;
  const int left = Mod(r - 1, n), right = Mod(r + 1, n);
  out.chains.resize(nchains);
  for (size_t j = 0; j < nchains; ++j) {
    char* scratch = p.scratch + (j % p.window) * 2 * p.segment_bytes;
    Seg g = SegOf(recv_count, seg_elems, j);
    auto& steps = out.chains[j].steps;
    for (int s = 0; s < n - 1; ++s) {
      int cs = Mod(r - s - 1, n), cr = Mod(r - s - 2, n);
      char* cur = scratch + (s % 2) * p.segment_bytes;
      char* prev = scratch + ((s + 1) % 2) * p.segment_bytes;
      Step st;
      st.send_peer = right;
      st.send_buf = s == 0 ? At(send, cs * recv_count + g.begin, esz) : prev;
      st.send_bytes = g.len * esz;
      st.recv_peer = left;
      st.recv_buf = cur;
      st.recv_bytes = g.len * esz;
      st.reduce_dst = s == n - 2 ? At(recv, g.begin, esz) : cur;
      st.reduce_a = At(send, cr * recv_count + g.begin, esz);
      st.reduce_count = g.len;
      if (s == n - 2 && p.op == ReduceOp::kAvg) st.scale_buf = st.reduce_dst, st.scale_count = g.len;
      steps.push_back(st);
    }
  }
  return out;
}

Schedule RingAllGather(const ScheduleParams& p, const void* send, void* recv, size_t send_count) {
  Schedule out;
  const int n = p.world_size, r = p.rank;
  const size_t esz = DataTypeSize(p.type);
  char* mine = At(recv, r * send_count, esz);
  if (mine != send) out.pre_copy_dst = mine, out.pre_copy_src = send, out.pre_copy_bytes = send_count * esz;
  if (send_count == 0 || n == 1) return out;
  const size_t seg_elems = p.segment_bytes / esz;
  const size_t nchains = (send_count + seg_elems - 1) / seg_elems;
  const int left = Mod(r - 1, n), right = Mod(r + 1, n);
  out.chains.resize(nchains);
  for (size_t j = 0; j < nchains; ++j) {
    Seg g = SegOf(send_count, seg_elems, j);
    for (int t = 0; t < n - 1; ++t) {
      int cs = Mod(r - t, n), cr = Mod(r - t - 1, n);
      Step st;
      st.send_peer = right;
      st.send_buf = At(recv, cs * send_count + g.begin, esz);
      st.send_bytes = g.len * esz;
      st.recv_peer = left;
      st.recv_buf = At(recv, cr * send_count + g.begin, esz);
      st.recv_bytes = g.len * esz;
      out.chains[j].steps.push_back(st);
    }
  }
  return out;
}

Schedule ChainBroadcast(const ScheduleParams& p, void* buffer, size_t count, int root) {
  Schedule out;
  const int n = p.world_size, r = p.rank;
  const size_t esz = DataTypeSize(p.type);
  if (count == 0 || n == 1) return out;
  const int vr = Mod(r - root, n);
  const size_t seg_elems = p.segment_bytes / esz;
  const size_t nchains = (count + seg_elems - 1) / seg_elems;
  out.chains.resize(nchains);
  for (size_t j = 0; j < nchains; ++j) {
    Seg g = SegOf(count, seg_elems, j);
    char* at = At(buffer, g.begin, esz);
    if (vr != 0) {
      Step st;
      st.msg = 0;
      st.recv_peer = Mod(r - 1, n), st.recv_buf = at, st.recv_bytes = g.len * esz;
      out.chains[j].steps.push_back(st);
    }
    if (vr != n - 1) {
      Step st;
      st.msg = 0;
      st.send_peer = Mod(r + 1, n), st.send_buf = at, st.send_bytes = g.len * esz;
      out.chains[j].steps.push_back(st);
    }
  }
  return out;
}

Schedule DisseminationBarrier(const ScheduleParams& p) {
  Schedule out;
  const int n = p.world_size, r = p.rank;
  if (n == 1) return out;
  out.chains.resize(1);
  for (int k = 1; k < n; k <<= 1) {
    Step st;
    st.send_peer = Mod(r + k, n);
    st.recv_peer = Mod(r - k, n);
    out.chains[0].steps.push_back(st);
  }
  return out;
}

}  // namespace athanor
