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
// Inside (ucx_communicator.cc is the front that picks the path per call):
// TagSchedulePath (tag_schedule_path.h) runs the tag-message schedules and
// the 2-rank pair call, SharedMemoryPath (shm_path.h) the one-host
// all-reduce, HierarchicalPath (hier_path.h) the one across hosts; each owns
// its state. OpEngine (op_engine.h) runs every path's pending ops under one
// lock and owns the progress thread; PeerWatch (peer_watch.h) names dead
// peers; UcxWorker (ucx_worker.h) holds the UCP context, worker and
// endpoints. Knobs: UcxTuning (ucx_tuning.h), in CommunicatorOptions::ucx.
//
// Thread model: one progress thread per communicator (world_size > 1). One
// mutex (the OpEngine's) guards the UCP worker and every pending operation;
// whoever holds it progresses the worker and advances *all* pending
// operations.
//  - The progress thread sleeps in the kernel (poll on the worker's event fd
//    after ucp_worker_arm, a wake-up eventfd, and the local peers' pidfds)
//    when nothing is pending, so an idle communicator costs no CPU. While
//    operations are pending and no caller waits, it progresses them: a short
//    spin, then an armed sleep (woken by UCX events, capped at a few ms so
//    timeouts and peer deaths are still seen). So AllReduceAsync moves on
//    with no thread in Wait.
//  - A thread in Work::Wait progresses inline (lowest latency) and the
//    progress thread stands aside until the last waiter leaves; Work::Done
//    progresses once. A waiter whose pending ops are all shared-memory ones
//    and that has seen no move for 500 us sleeps on a futex in the peer's
//    segment until the peer publishes (op_engine.h), so a rank never holds
//    a core while its peer waits for one. Blocking calls (Communicator::AllReduce, ...) do not
//    wake the progress thread at all: their caller progresses.
// Any thread may call any method; callbacks (UcxTuning::on_done) run with
// the engine's lock held on whichever thread progressed.
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
// communicator unusable, as does any failed call that UCX still held
// requests of (a receive already matched, a send): once a call has
// returned its error, or Abort has returned, UCX moves no data through that
// call's buffers again, so the caller may free them (OpEngine::Halt, in
// op_engine.h). A Work must not outlive its communicator.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "collectives/factory.h"
#include "collectives/ucx/ucx_tuning.h"

namespace athanor {

// Knobs come from options.ucx (see ucx_tuning.h).
absl::StatusOr<std::unique_ptr<Communicator>> CreateUcxCommunicator(
    const CommunicatorOptions& options);

}  // namespace athanor
