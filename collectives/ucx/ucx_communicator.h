// The UCX backend: collectives on host memory over the UCP tag API.
//
// When every rank lives on this host, all-reduces (above 64 KiB with 2
// ranks, from 512 B with more) go through shared memory UCX allocates and
// every peer maps (ShmAllReduce, shm_all_reduce.h). When ranks span hosts
// (told apart by boot id and network namespace, topology.h) and some host has
// several, all-reduces of hierarchical_min_bytes and more are hierarchical:
// shared memory on each host, each block exchanged between hosts over plain
// TCP connections between its owners (hier_exchange.h, socket_links.h; UCX
// tag messages with hierarchical_sockets off). Otherwise large all-reduces run ring
// reduce-scatter + all-gather cut into pipelined segments (several in flight
// per peer, reduced straight from the receive scratch into the destination);
// small ones run recursive doubling. Which one a size runs is logged once per
// power-of-two size class at debug level. UCX picks
// the transport itself (shared memory, TCP, verbs; UCX_TLS is respected) and
// the chosen lanes are logged at start-up. Worker addresses are exchanged
// through the TCP store served by rank 0 (collectives/bootstrap/tcp_store.h).
//
// Thread model: one progress thread per communicator (world_size > 1). One
// mutex (mu_) guards the UCP worker and every pending operation; whoever holds
// it progresses the worker and advances *all* pending operations.
//  - The progress thread sleeps in the kernel (poll on the worker's event fd
//    after ucp_worker_arm, a wake-up eventfd, and the local peers' pidfds)
//    when nothing is pending, so an idle communicator costs no CPU. While
//    operations are pending and no caller waits, it progresses them: a short
//    spin, then an armed sleep (woken by UCX events, capped at a few ms so
//    timeouts and peer deaths are still seen). So AllReduceAsync moves on
//    with no thread in Wait.
//  - A thread in Work::Wait progresses inline (lowest latency) and the
//    progress thread stands aside until the last waiter leaves; Work::Done
//    progresses once. Blocking calls (Communicator::AllReduce, ...) do not
//    wake the progress thread at all: their caller progresses.
// Any thread may call any method; callbacks (UcxTuning::on_done) run with
// mu_ held on whichever thread progressed.
//
// Tags: the low 20 bits of CollectiveOptions::tag, plus a per-tag sequence
// number (8 bits), select the messages of a call, so concurrent calls need
// tags that differ in their low 20 bits, and one rank may run at most 255
// calls with one tag ahead of another. Tags whose low 20 bits are 0xFFFFE or
// 0xFFFFF are reserved (the hierarchical op order, the start-up hello). On
// the shared-memory and hierarchical paths a rank may have at most 64
// all-reduces pending.
//
// Lifetime: the destructor waits (up to the bootstrap timeout) until every
// healthy rank reaches its destructor, so no endpoint closes under a peer
// still reading; rank 0 also keeps the TCP store up until the others leave.
//
// Errors: endpoints to other hosts use UCX peer error handling; peers on this
// host are watched through pidfds (see UcxTuning). Either way a dead rank fails every
// pending and later call with Unavailable naming it; an operation past its
// CollectiveOptions::timeout fails with DeadlineExceeded. Either leaves the
// communicator unusable. A Work must not outlive its communicator.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "collectives/factory.h"

namespace athanor {

// Tuning knobs; defaults suit shared memory on one host.
struct UcxTuning {
  size_t segment_bytes = 512 << 10;
  int window = 4;
  size_t small_bytes = 64 << 10;  // all-reduces up to this size use recursive doubling
  // UCX keepalive period: how fast a silent dead peer is noticed
  // (UCX_KEEPALIVE_INTERVAL in the environment wins).
  std::string keepalive_interval = "1s";
  // Peers on this host: keep UCX shared memory (which cannot report a dead
  // peer) and watch their processes through pidfds every watch_period.
  bool watch_local_peers = true;
  std::chrono::milliseconds watch_period{20};
  // Run the progress thread (see "Thread model"); false: operations move
  // only while some thread waits on or polls them.
  bool progress_thread = true;
  // Ranks that all live on one host: all-reduces of at least
  // shared_min_bytes (with 2 ranks: also above small_bytes, where the pair
  // path is faster) run through shared memory instead of tag messages.
  // Every rank maps every other rank's segment (UCX allocates it and hands
  // out a pointer to it: ucp_mem_map + ucp_rkey_ptr; not possible when
  // UCX_TLS leaves out shared memory) of shared_slots chunks of
  // shared_chunk_bytes, and each rank reduces its share of each chunk
  // straight out of its peers' segments. See ucx_shm.cc.
  bool shared_memory = true;
  size_t shared_min_bytes = 512;
  size_t shared_chunk_bytes = 512 << 10;
  int shared_slots = 4;
  // Shared all-reduces up to this size are staged whole when submitted, and
  // every rank reduces all of it once the call runs (no synchronisation
  // beyond the agreed order; also the staging buffer size per entry).
  size_t shared_one_shot_bytes = 16 << 10;
  // Ranks on several hosts, some host with more than one: all-reduces of
  // at least hierarchical_min_bytes reduce-scatter through shared memory on
  // each host, all-reduce each block between hosts over tag messages, and
  // all-gather through shared memory (shm_all_reduce.h); smaller ones, and
  // every call with hierarchical off, run the flat ring or recursive
  // doubling over tag messages.
  bool hierarchical = true;
  // ... and the blocks cross hosts over plain TCP connections between their
  // owners (socket_links.h) instead of UCX tag messages: 1 always, 0 never,
  // -1 where UCX itself would cross over TCP (no verbs lane to a rank on
  // another host), so InfiniBand and RoCE keep UCX's RDMA.
  int hierarchical_sockets = -1;
  // A thread in Work::Wait that has spun a while without the op finishing
  // sleeps this long between polls instead of yielding (0: yield). Where
  // ranks share cores with the network stack (namespace hosts on one
  // machine) sleeping leaves the kernel the CPU it needs to move the data.
  int wait_nap_us = 0;
  size_t hierarchical_min_bytes = 256 << 10;
  // Slots of the hierarchical path (its own segments' geometry, instead of
  // shared_chunk_bytes and shared_slots): more and longer transfers in
  // flight between hosts. A call is cut into about this many chunks, each
  // at least 256 KiB and at most a slot.
  size_t hierarchical_chunk_bytes = 1 << 20;
  int hierarchical_slots = 8;
  // Between three hosts or more, calls of at least this size run a ring
  // between each block's owners (2 (hosts-1)/hosts x the block sent, in
  // 2 (hosts-1) steps); smaller ones a direct exchange (hosts-1 x the block,
  // one step). See hier_exchange.h.
  size_t hierarchical_ring_min_bytes = 16 << 20;
  // Test hook: called once per operation when it finishes, with its tag and
  // status, under the communicator's lock (must not call back into it).
  std::function<void(uint64_t tag, const absl::Status& status)> on_done;
};

absl::StatusOr<std::unique_ptr<Communicator>> CreateUcxCommunicator(
    const CommunicatorOptions& options, const UcxTuning& tuning = {});

}  // namespace athanor
