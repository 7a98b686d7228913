// athanor-bench-allreduce --hosts L: the all-reduce across "hosts" stood for
// by network + UTS namespaces on one bridge (as tests/cross_host does), with
// ranks placed per layout L ("2+2": ranks 0-1 on host 0, 2-3 on host 1);
// the links and the bridge have the MTU CrossHostOptions::mtu.
// Each run times, one after the other on the same namespaces and sizes, the
// ucx backend's flat ring (ATHANOR_UCX_HIERARCHICAL=0), its hierarchical
// all-reduce (=1), and PyTorch's gloo (gloo_allreduce.py under Debian's
// /usr/bin/python3 with python3-torch; the column says so when absent), and
// prints them side by side with the per-run ratios and their medians. The
// ucx ranks nap 200 us between polls once they have spun
// (ATHANOR_UCX_WAIT_NAP_US; the namespace hosts share this machine's cores
// with the kernel's network stack).
// Needs root. Blocking; run from main() before any rank starts.
#pragma once

#include <string>
#include <vector>

namespace athanor {

struct CrossHostOptions {
  std::string layout;  // "2+2", "3+1", "1+1+2"
  int runs = 3;
  int mtu = 1500;  // of the veth links and the bridge (the kernel's default)
  size_t min_bytes = 1 << 20, max_bytes = 64 << 20;
  int iters = 5, batches = 5, warmup = 2;
  bool check = false;
  std::string json;  // one object per size and run
};

// Returns the process exit code.
int RunCrossHost(const CrossHostOptions& options);

}  // namespace athanor
