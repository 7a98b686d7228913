// Box activity: cumulative counters that show an interactive rank in use
// besides its CPU and GPU time (RankReport.activity). The coordinator takes
// differences between heartbeats; here only totals are read. Pure /proc
// reads; thread-safe.
//
// Network: when the rank's leader is in a network namespace of its own (a
// job network), the namespace's interface counters (received + sent bytes of
// every interface but lo, /proc/<pid>/net/dev). Otherwise the bytes received
// and acknowledged of the TCP sockets the rank's processes hold open now
// (sock_diag's tcp_info, matched to /proc/<pid>/fd by inode): a socket that
// opened and closed between two samples is not seen; with a SocketTally a
// closed one's bytes stay in the sum (without, they leave it, and the
// coordinator takes no rate from a sum that fell). UDP is not counted. (/proc/<pid>/io rchar and wchar would miss recv and send
// calls, which most clients use on sockets.)
// Disk: bytes the rank's processes caused to be written to storage
// (/proc/<pid>/io write_bytes).
// "The rank's processes" are those of the leader's process group, as for
// its CPU time (proc_stats.h); a process that starts a session of its own
// leaves the group and is not counted.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>

namespace athanor::agent {

struct BoxActivity {
  bool measured = false;  // false: nothing could be read (the group is gone)
  bool net_namespace = false;  // net_bytes are interface counters (else TCP sockets' bytes)
  double net_bytes = 0;
  double disk_write_bytes = 0;
};

// TCP sockets of this network namespace: inode -> bytes received + acked.
using TcpBytes = std::map<uint64_t, double>;
// Read through NETLINK_SOCK_DIAG (IPv4 and IPv6); empty when it fails.
TcpBytes ReadTcpBytes();

// Keeps one rank's socket bytes cumulative across samples: a socket counts
// from its first sight and stays counted once closed, so the sum falls no
// more when a connection ends. Not thread-safe (its rank's owner's lock).
class SocketTally {
 public:
  // `now`: the group's sockets' bytes now; returns the total so far.
  double Update(const TcpBytes& now);

 private:
  TcpBytes last_;
  double total_ = 0;
};

// `tcp`: the namespace's sockets (null: read them now). `tally` (null: none)
// makes net_bytes cumulative outside a namespace of the box's own.
BoxActivity SampleBoxActivity(pid_t pgid, const std::string& proc_root = "/proc",
                              const TcpBytes* tcp = nullptr, SocketTally* tally = nullptr);

// /proc/<pid>/io: rchar, wchar and write_bytes. False when none is found.
bool ParseProcIo(const std::string& text, double* rchar, double* wchar, double* write_bytes);
// /proc/<pid>/net/dev: received + sent bytes of every interface but lo; -1
// when the text is not that table.
double ParseNetDev(const std::string& text);

}  // namespace athanor::agent
