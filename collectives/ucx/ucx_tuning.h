// UcxTuning: the ucx backend's knobs, as plain data.
//
// Built once at the edge: a main reads its flags and the ATHANOR_UCX_*
// variables with UcxTuningFromEnv (ucx_tuning_env.h) and hands the result
// down in CommunicatorOptions::ucx; tests set fields directly. Nothing below
// reads the environment for these. Defaults suit shared memory on one host.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"

namespace athanor {

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
  // straight out of its peers' segments. See shm_path.h.
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
  // SO_SNDBUF / SO_RCVBUF of those sockets (0: the kernel's own sizing).
  int socket_buffer_bytes = 0;
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

}  // namespace athanor
