// The conformance suite on the ucx backend, as threads and as processes, and
// its failure behaviour (a killed rank, a rank that never joins).
#include "collectives/ucx/ucx_communicator.h"

#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives/testing/conformance.h"
#include "collectives/testing/rank_harness.h"
#include "common/net.h"
#include "common/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace athanor {
namespace {

using ::testing::HasSubstr;

void ExpectAllOk(const std::vector<absl::Status>& results) {
  for (size_t r = 0; r < results.size(); ++r) {
    EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
  }
}

class UcxConformance : public ::testing::TestWithParam<int> {};

TEST_P(UcxConformance, Threads) {
  HarnessOptions h;
  h.world_size = GetParam();
  ConformanceOptions c;
  if (h.world_size > 4) c.big_counts = {};  // keep 7 threads on 2 cores fast
  ExpectAllOk(RunRanksAsThreads(h, [&](int, Communicator* comm) {
    EXPECT_EQ(comm->backend(), h.world_size == 1 ? "ucx" : "ucx");
    EXPECT_EQ(comm->world_size(), h.world_size);
    return RunConformance(comm, c);
  }));
}

TEST_P(UcxConformance, Processes) {
  HarnessOptions h;
  h.world_size = GetParam();
  ConformanceOptions c;
  if (h.world_size > 4) c.big_counts = {};
  ExpectAllOk(RunRanksAsProcesses(h, [&](int, Communicator* comm) {
    RETURN_IF_ERROR(RunConformance(comm, c));
    return RunConcurrentTags(comm);
  }));
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, UcxConformance, ::testing::Values(1, 2, 3, 4, 7));

// UCX settings go through its config object: creating communicators (ranks
// as threads here) never writes the process environment, which would race
// with other threads' getenv.
TEST(UcxCommunicator, LeavesTheEnvironmentAlone) {
  for (const char* name : {"UCX_SYSV_FIFO_ELEM_SIZE", "UCX_POSIX_FIFO_ELEM_SIZE",
                           "UCX_MM_FIFO_ELEM_SIZE", "UCX_KEEPALIVE_INTERVAL"}) {
    unsetenv(name);  // before any rank thread starts
  }
  HarnessOptions h;
  h.world_size = 2;
  ExpectAllOk(RunRanksAsThreads(h, [](int, Communicator* comm) { return comm->Barrier(); }));
  for (const char* name : {"UCX_SYSV_FIFO_ELEM_SIZE", "UCX_POSIX_FIFO_ELEM_SIZE",
                           "UCX_MM_FIFO_ELEM_SIZE", "UCX_KEEPALIVE_INTERVAL"}) {
    EXPECT_EQ(getenv(name), nullptr) << name << " was set to " << getenv(name);
  }
}

TEST(UcxCommunicator, ConcurrentTagsDoNotMix) {
  HarnessOptions h;
  h.world_size = 3;
  ExpectAllOk(RunRanksAsThreads(h, [](int, Communicator* comm) { return RunConcurrentTags(comm); }));
}

// 2 ranks, small messages: a blocking call takes the inline pair path, an
// async one the generic schedule; they must pair up, in and out of place.
TEST(UcxCommunicator, PairFastPathMatchesAsyncPeer) {
  HarnessOptions h;
  h.world_size = 2;
  ExpectAllOk(RunRanksAsProcesses(h, [](int rank, Communicator* comm) -> absl::Status {
    for (size_t count : {size_t{1}, size_t{64}, size_t{16384}}) {  // 16384 f32: 64 KiB
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
        for (bool in_place : {true, false}) {
          std::vector<float> send(count), recv(count, -1.0f);
          for (size_t i = 0; i < count; ++i) send[i] = static_cast<float>(rank * 4 + (i % 7));
          void* dst = in_place ? static_cast<void*>(send.data()) : recv.data();
          // Rank 0 blocks (pair path); rank 1 runs the async schedule.
          if (rank == 0) {
            RETURN_IF_ERROR(comm->AllReduce(send.data(), dst, count, DataType::kF32, op));
          } else {
            auto work = comm->AllReduceAsync(send.data(), dst, count, DataType::kF32, op, {});
            RETURN_IF_ERROR(work->Wait(std::chrono::seconds(20)));
          }
          const float* out = static_cast<const float*>(dst);
          for (size_t i = 0; i < count; ++i) {
            const float a = static_cast<float>(i % 7), b = a + 4.0f;
            const float want = op == ReduceOp::kSum ? a + b : op == ReduceOp::kAvg ? (a + b) / 2 : b;
            if (out[i] != want) {
              return absl::InternalError(absl::StrCat("count ", count, " op ", static_cast<int>(op),
                                                      " element ", i, ": ", out[i], " want ", want));
            }
          }
        }
      }
    }
    return absl::OkStatus();
  }));
}

// The ring and recursive doubling, with the shared-memory path turned off
// (the path ranks on several hosts take).
TEST(UcxCommunicator, ConformanceWithoutSharedMemory) {
  for (int n : {2, 3}) {
    HarnessOptions h;
    h.world_size = n;
    h.create = [](const CommunicatorOptions& o) {
      UcxTuning t;
      t.shared_memory = false;
      CommunicatorOptions with_tuning = o;
      with_tuning.ucx = t;
      return CreateUcxCommunicator(with_tuning);
    };
    ExpectAllOk(RunRanksAsProcesses(h, [](int, Communicator* comm) -> absl::Status {
      RETURN_IF_ERROR(RunConformance(comm));
      return RunConcurrentTags(comm);
    }));
  }
}

// Large all-reduces on one host go through shared memory whether a rank
// blocks or not; 100003 elements cut into unaligned shares; the output equal
// to, apart from, or overlapping the input.
TEST(UcxCommunicator, SharedMemoryBlockingAndAsyncPeersAgree) {
  HarnessOptions h;
  h.world_size = 3;
  ExpectAllOk(RunRanksAsProcesses(h, [](int rank, Communicator* comm) -> absl::Status {
    constexpr size_t kCount = 100003;
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
      for (size_t shift : {size_t{0}, size_t{kCount + 16}, size_t{5}}) {  // in place, apart, overlap
        std::vector<float> buf(2 * kCount + 16, -1.0f);
        for (size_t i = 0; i < kCount; ++i) buf[i] = static_cast<float>(rank * 4 + (i % 7));
        float* dst = buf.data() + shift;
        if (rank == 0) {
          RETURN_IF_ERROR(comm->AllReduce(buf.data(), dst, kCount, DataType::kF32, op));
        } else {
          auto work = comm->AllReduceAsync(buf.data(), dst, kCount, DataType::kF32, op, {});
          RETURN_IF_ERROR(work->Wait(std::chrono::seconds(20)));
        }
        for (size_t i = 0; i < kCount; ++i) {
          const float a = static_cast<float>(i % 7);  // rank 0's; then a + 4, a + 8
          const float want = op == ReduceOp::kSum ? 3 * a + 12 : op == ReduceOp::kAvg ? a + 4 : a + 8;
          if (dst[i] != want) {
            return absl::InternalError(absl::StrCat("op ", ReduceOpName(op), " shift ", shift,
                                                    " element ", i, ": ", dst[i], " want ", want));
          }
        }
      }
    }
    return absl::OkStatus();
  }));
}

// Shared-memory all-reduces issued in a different order on every rank (small
// staged ones and large chunked ones mixed), and a rank that waits for a
// later call before issuing an earlier one: each gets its own result.
absl::Status CallsInDifferentOrders(int rank, Communicator* comm) {
  const int n = comm->world_size();
  constexpr int kOps = 10;
  auto count_of = [](int k) { return k % 2 == 0 ? size_t{256} << (k / 2) : size_t{25000} * k; };
  auto check = [&](int k, const std::vector<int32_t>& buf) -> absl::Status {
    for (size_t i = 0; i < buf.size(); ++i) {
      // Rank q contributes q + k + i % 13.
      const int32_t want = n * (n - 1) / 2 + n * (k + static_cast<int32_t>(i % 13));
      if (buf[i] != want) {
        return absl::InternalError(absl::StrCat("tag ", k, " element ", i, ": ", buf[i], " want ", want));
      }
    }
    return absl::OkStatus();
  };
  for (int round = 0; round < 3; ++round) {
    std::vector<std::vector<int32_t>> bufs(kOps);
    std::vector<std::unique_ptr<Work>> works(kOps);
    std::vector<int> order(kOps);
    const int stride[4] = {1, 3, 7, 9};  // coprime to kOps: each gives a permutation
    for (int j = 0; j < kOps; ++j) order[j] = (j * stride[rank] + round) % kOps;
    for (int k = 0; k < kOps; ++k) {
      bufs[k].resize(count_of(k));
      for (size_t i = 0; i < bufs[k].size(); ++i) bufs[k][i] = rank + k + static_cast<int32_t>(i % 13);
    }
    for (int k : order) {
      CollectiveOptions o;
      o.tag = 500 + k;
      works[k] = comm->AllReduceAsync(bufs[k].data(), bufs[k].data(), bufs[k].size(),
                                      DataType::kI32, ReduceOp::kSum, o);
    }
    for (int k = 0; k < kOps; ++k) {
      RETURN_IF_ERROR(works[k]->Wait(std::chrono::seconds(30)));
      RETURN_IF_ERROR(check(k, bufs[k]));
    }
  }
  // Rank 0 issues X then Y; the others finish Y before they issue X.
  std::vector<int32_t> x(count_of(3)), y(count_of(2));
  for (size_t i = 0; i < x.size(); ++i) x[i] = rank + 3 + static_cast<int32_t>(i % 13);
  for (size_t i = 0; i < y.size(); ++i) y[i] = rank + 2 + static_cast<int32_t>(i % 13);
  CollectiveOptions ox, oy;
  ox.tag = 700;
  oy.tag = 701;
  if (rank == 0) {
    auto wx = comm->AllReduceAsync(x.data(), x.data(), x.size(), DataType::kI32, ReduceOp::kSum, ox);
    auto wy = comm->AllReduceAsync(y.data(), y.data(), y.size(), DataType::kI32, ReduceOp::kSum, oy);
    RETURN_IF_ERROR(wx->Wait(std::chrono::seconds(30)));
    RETURN_IF_ERROR(wy->Wait(std::chrono::seconds(30)));
  } else {
    RETURN_IF_ERROR(comm->AllReduce(y.data(), y.data(), y.size(), DataType::kI32, ReduceOp::kSum, oy));
    RETURN_IF_ERROR(comm->AllReduce(x.data(), x.data(), x.size(), DataType::kI32, ReduceOp::kSum, ox));
  }
  RETURN_IF_ERROR(check(3, x));
  return check(2, y);
}

TEST(UcxCommunicator, SharedMemoryRunsCallsIssuedInDifferentOrders) {
  HarnessOptions h;
  h.world_size = 4;
  ExpectAllOk(RunRanksAsProcesses(h, CallsInDifferentOrders));
  ExpectAllOk(RunRanksAsThreads(h, CallsInDifferentOrders));
}

// A rank that never makes a shared-memory all-reduce: the others time out
// with where every rank stands (op counts and the next op's tag).
TEST(UcxCommunicator, SharedMemoryTimeoutSaysWhereEveryRankStands) {
  HarnessOptions h;
  h.world_size = 3;
  auto results = RunRanksAsProcesses(h, [](int rank, Communicator* comm) -> absl::Status {
    std::vector<float> buf(100000, 1.0f);
    CollectiveOptions o;
    o.tag = 42;
    RETURN_IF_ERROR(comm->AllReduce(buf.data(), buf.data(), buf.size(), DataType::kF32, ReduceOp::kSum, o));
    if (rank == 2) return absl::OkStatus();  // skips the second call
    o.timeout = std::chrono::seconds(1);
    o.tag = 43;
    return comm->AllReduce(buf.data(), buf.data(), buf.size(), DataType::kF32, ReduceOp::kSum, o);
  });
  EXPECT_TRUE(results[2].ok()) << results[2];
  for (int r : {0, 1}) {
    EXPECT_EQ(results[r].code(), absl::StatusCode::kDeadlineExceeded) << results[r];
    // Ranks 0 and 1 announced tag 43 and wait; rank 2 finished one op and
    // has nothing pending (or has left).
    EXPECT_THAT(results[r].message(),
                HasSubstr("shared-memory progress (rank: ops finished, next op's tag): 0: 1, 43; "
                          "1: 1, 43; 2: 1, none"))
        << results[r];
  }
}

// Ranks that disagree about a shared-memory all-reduce fail with an error
// saying so, instead of mixing the two calls.
TEST(UcxCommunicator, SharedMemoryMismatchedCallsFailClearly) {
  HarnessOptions h;
  h.world_size = 2;
  h.watchdog = std::chrono::seconds(60);
  auto results = RunRanksAsProcesses(h, [](int rank, Communicator* comm) -> absl::Status {
    std::vector<float> buf(100000 + rank, 1.0f);
    return comm->AllReduce(buf.data(), buf.data(), buf.size(), DataType::kF32, ReduceOp::kSum);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r].code(), absl::StatusCode::kInvalidArgument) << "rank " << r << ": " << results[r];
    EXPECT_THAT(results[r].message(),
                HasSubstr(absl::StrCat("ranks called different all-reduces with tag 0: rank ", r,
                                       " has ", 100000 + r, " elements of f32, op sum; rank ",
                                       1 - r, " has ", 100001 - r, " elements of f32")))
        << results[r];
  }
}

TEST(UcxCommunicator, PairFastPathNamesKilledPeer) {
  HarnessOptions h;
  h.world_size = 2;
  h.timeout = std::chrono::seconds(30);
  h.watchdog = std::chrono::seconds(45);
  auto results = RunRanksAsProcesses(h, [](int rank, Communicator* comm) -> absl::Status {
    float x = 1.0f;
    RETURN_IF_ERROR(comm->AllReduce(&x, &x, 1, DataType::kF32, ReduceOp::kSum));
    if (x != 2.0f) return absl::InternalError(absl::StrCat("got ", x, " want 2"));
    if (rank == 1) kill(getpid(), SIGKILL);
    CollectiveOptions o;
    o.timeout = std::chrono::seconds(20);
    return comm->AllReduce(&x, &x, 1, DataType::kF32, ReduceOp::kSum, o);
  });
  EXPECT_THAT(results[1].message(), HasSubstr("died without a report")) << results[1];
  EXPECT_EQ(results[0].code(), absl::StatusCode::kUnavailable) << results[0];
  EXPECT_THAT(results[0].message(), HasSubstr("peer rank 1 ")) << results[0];
}

TEST(UcxCommunicator, AbortFailsLaterCalls) {
  HarnessOptions h;
  h.world_size = 2;
  ExpectAllOk(RunRanksAsThreads(h, [](int, Communicator* comm) -> absl::Status {
    RETURN_IF_ERROR(comm->Barrier());
    comm->Abort();
    int32_t x = 1;
    absl::Status s = comm->AllReduce(&x, &x, 1, DataType::kI32, ReduceOp::kSum);
    if (!absl::IsAborted(s)) return absl::InternalError(absl::StrCat("want Aborted, got ", s.ToString()));
    return absl::OkStatus();
  }));
}

TEST(UcxCommunicator, KilledRankIsNamedOnEveryOtherRank) {
  HarnessOptions h;
  h.world_size = 4;
  h.timeout = std::chrono::seconds(30);
  h.watchdog = std::chrono::seconds(45);
  constexpr int kVictim = 2;
  auto results = RunRanksAsProcesses(h, [](int rank, Communicator* comm) -> absl::Status {
    std::vector<float> buf(16 << 20, 1.0f);  // 64 MiB: many segments in flight
    RETURN_IF_ERROR(comm->AllReduce(buf.data(), buf.data(), buf.size(), DataType::kF32, ReduceOp::kSum));
    if (rank == kVictim) {  // dies in the middle of the next one, some segments moved
      auto work = comm->AllReduceAsync(buf.data(), buf.data(), buf.size(), DataType::kF32,
                                       ReduceOp::kSum, {});
      for (int i = 0; i < 200 && !work->Done(); ++i) {
      }
      kill(getpid(), SIGKILL);
    }
    CollectiveOptions o;
    o.timeout = std::chrono::seconds(20);
    for (int i = 0; i < 50; ++i) {
      RETURN_IF_ERROR(comm->AllReduce(buf.data(), buf.data(), buf.size(), DataType::kF32,
                                      ReduceOp::kSum, o));
    }
    return absl::InternalError("every all-reduce succeeded although a rank was killed");
  });
  for (int r = 0; r < h.world_size; ++r) {
    if (r == kVictim) {
      EXPECT_THAT(results[r].message(), HasSubstr("died without a report")) << results[r];
      continue;
    }
    EXPECT_EQ(results[r].code(), absl::StatusCode::kUnavailable) << "rank " << r << ": " << results[r];
    // Through the pidfd watch ("(pid N) exited") or a transport error on it.
    EXPECT_THAT(results[r].message(), HasSubstr("peer rank 2 ")) << "rank " << r << ": " << results[r];
  }
}

// The path used for peers on other hosts: UCX's own peer error handling (TCP).
TEST(UcxCommunicator, KilledRankIsNamedThroughUcxPeerErrorHandling) {
  HarnessOptions h;
  h.world_size = 3;
  h.timeout = std::chrono::seconds(30);
  h.watchdog = std::chrono::seconds(45);
  h.create = [](const CommunicatorOptions& o) {
    setenv("UCX_TLS", "tcp,self", 1);  // in the forked child only
    UcxTuning t;
    t.watch_local_peers = false;
    t.keepalive_interval = "200ms";
    CommunicatorOptions with_tuning = o;
    with_tuning.ucx = t;
    return CreateUcxCommunicator(with_tuning);
  };
  constexpr int kVictim = 1;
  auto results = RunRanksAsProcesses(h, [](int rank, Communicator* comm) -> absl::Status {
    std::vector<float> buf(4 << 20, 1.0f);
    RETURN_IF_ERROR(comm->AllReduce(buf.data(), buf.data(), buf.size(), DataType::kF32, ReduceOp::kSum));
    if (rank == kVictim) kill(getpid(), SIGKILL);
    CollectiveOptions o;
    o.timeout = std::chrono::seconds(20);
    for (int i = 0; i < 50; ++i) {
      RETURN_IF_ERROR(comm->AllReduce(buf.data(), buf.data(), buf.size(), DataType::kF32,
                                      ReduceOp::kSum, o));
    }
    return absl::InternalError("every all-reduce succeeded although a rank was killed");
  });
  for (int r : {0, 2}) {
    EXPECT_EQ(results[r].code(), absl::StatusCode::kUnavailable) << "rank " << r << ": " << results[r];
    EXPECT_THAT(results[r].message(), HasSubstr("peer rank 1")) << "rank " << r << ": " << results[r];
  }
}

// Whether process `pid` is stopped (SIGSTOP; "t" under a tracer), from
// /proc/<pid>/stat.
bool IsStopped(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() &&
         (stat[paren + 2] == 'T' || stat[paren + 2] == 't');
}

// For the tests below: ranks as processes over TCP endpoints with UCX peer
// error handling (as between hosts), the ring over tag messages receiving
// straight into the caller's buffer, and what the ranks tell each other
// (in memory shared across the fork).
struct StopShared {
  std::atomic<pid_t> pid[3] = {0, 0, 0};
  std::atomic<bool> stopping{false};  // the stopped rank is about to stop
  std::atomic<bool> done{false};      // ... and its call has returned since
};

HarnessOptions StopHarness(int world_size) {
  HarnessOptions h;
  h.world_size = world_size;
  h.timeout = std::chrono::seconds(30);
  h.watchdog = std::chrono::seconds(60);
  h.create = [](const CommunicatorOptions& o) {
    setenv("UCX_TLS", "tcp,self", 1);  // in the forked child only: rendezvous over TCP
    UcxTuning t;
    t.shared_memory = false;
    t.watch_local_peers = false;
    CommunicatorOptions with_tuning = o;
    with_tuning.ucx = t;
    return CreateUcxCommunicator(with_tuning);
  };
  return h;
}

constexpr size_t kStopCount = 4 << 20;  // 16 MiB of f32: 512 KiB rendezvous segments

float* MapFloats() {
  void* p = mmap(nullptr, kStopCount * sizeof(float), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : static_cast<float*>(p);
}

// Maps the call's buffers (ones to send) and runs one all-reduce of them,
// which wires up the rendezvous lanes (UCX does that on the first large
// message).
absl::Status MapAndWireUp(Communicator* comm, float** send, float** recv) {
  *send = MapFloats();
  *recv = MapFloats();
  if (*send == nullptr || *recv == nullptr) return absl::InternalError("mmap failed");
  for (size_t i = 0; i < kStopCount; ++i) (*send)[i] = 1.0f;
  return comm->AllReduce(*send, *recv, kStopCount, DataType::kF32, ReduceOp::kSum);
}

// The stopped rank: posts its all-reduce, lets its requests to send go
// out, stops (SIGSTOP) and, once resumed, returns its call's status.
absl::Status PostAndStop(StopShared* shared, Communicator* comm, const float* send, float* recv,
                         const CollectiveOptions& o) {
  auto work = comm->AllReduceAsync(send, recv, kStopCount, DataType::kF32, ReduceOp::kSum, o);
  for (int i = 0; i < 1000; ++i) work->Done();
  shared->stopping = true;
  raise(SIGSTOP);
  absl::Status s = work->Wait(std::chrono::seconds(30));
  shared->done = true;
  return s;
}

// The other side: once rank `stopped` is stopped owing matched data, posts
// the same call, lets `fail` end it, unmaps the receive buffer, resumes the
// stopped rank and progresses the worker until that rank's call is over (so
// the data it owed has come). Returns this call's status.
absl::Status FailWhileOwed(StopShared* shared, Communicator* comm, int stopped, float* send, float* recv,
                           const CollectiveOptions& o, const std::function<void()>& fail,
                           std::chrono::seconds wait) {
  while (!shared->stopping || !IsStopped(shared->pid[stopped])) sched_yield();
  struct Resume {
    pid_t pid;
    ~Resume() { kill(pid, SIGCONT); }
  } resume{shared->pid[stopped]};
  // The stopped rank's requests to send are in our socket: progressing matches them.
  auto work = comm->AllReduceAsync(send, recv, kStopCount, DataType::kF32, ReduceOp::kSum, o);
  for (int i = 0; i < 1000; ++i) work->Done();
  fail();
  absl::Status s = work->Wait(wait);
  munmap(recv, kStopCount * sizeof(float));
  kill(shared->pid[stopped], SIGCONT);
  while (!shared->done) {
    work->Done();
    sched_yield();
  }
  munmap(send, kStopCount * sizeof(float));
  return s;
}

// The shared page of the stop tests.
StopShared* MapStopShared() {
  void* mem = mmap(nullptr, sizeof(StopShared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  return mem == MAP_FAILED ? nullptr : new (mem) StopShared;
}

// Once a call has returned its error the caller may free its buffers at
// once, even while a peer still owes data that UCX had already matched to
// them. Rank 1 posts a ring all-reduce and stops, so rank 0's receives
// match its rendezvous requests but no data comes; rank 0 aborts, sees its
// call fail, unmaps its receive buffer and lets rank 1 go on, which then
// sends that data. Rank 0 must not write it there, whoever progresses the
// worker (Done here, the progress thread, the destructor). Its send buffer
// stays mapped: sending from unmapped memory fails the endpoint (EFAULT)
// before any data comes in, and would hide the receive.
TEST(UcxCommunicator, FailedCallNeverTouchesItsBuffersAgain) {
  StopShared* shared = MapStopShared();
  ASSERT_NE(shared, nullptr);
  auto body = [shared](int rank, Communicator* comm) -> absl::Status {
    shared->pid[rank] = getpid();
    float *send = nullptr, *recv = nullptr;
    RETURN_IF_ERROR(MapAndWireUp(comm, &send, &recv));
    CollectiveOptions o;
    o.timeout = std::chrono::seconds(2);
    if (rank == 1) {
      absl::Status s = PostAndStop(shared, comm, send, recv, o);  // rank 0 left the call
      return s.ok() ? absl::InternalError("the call succeeded although rank 0 aborted")
                    : absl::OkStatus();
    }
    // Rank 1 sends what it owes once resumed, then its call fails.
    absl::Status s = FailWhileOwed(shared, comm, 1, send, recv, o, [comm] { comm->Abort(); }, std::chrono::seconds(10));
    return absl::IsAborted(s) ? absl::OkStatus() : absl::InternalError(absl::StrCat("want Aborted, got ", s.ToString()));
  };
  auto results = RunRanksAsProcesses(StopHarness(2), body);
  EXPECT_TRUE(results[0].ok()) << "rank 0: " << results[0];
  EXPECT_TRUE(results[1].ok()) << "rank 1: " << results[1];
  munmap(shared, sizeof(StopShared));
}

// As above, the call failed by a peer's death, as when a host dies: rank 2,
// which sends to rank 0 in the ring, stops owing it matched data; rank 0
// kills rank 1, sees its call fail naming rank 1, unmaps its receive buffer
// and lets rank 2 go on. Both survivors still name rank 1.
TEST(UcxCommunicator, CallFailedByDeadPeerNeverTouchesItsBuffersAgain) {
  StopShared* shared = MapStopShared();
  ASSERT_NE(shared, nullptr);
  auto body = [shared](int rank, Communicator* comm) -> absl::Status {
    shared->pid[rank] = getpid();
    float *send = nullptr, *recv = nullptr;
    RETURN_IF_ERROR(MapAndWireUp(comm, &send, &recv));
    CollectiveOptions o;
    o.timeout = std::chrono::seconds(20);
    if (rank == 1) {
      for (;;) pause();  // until rank 0 kills it
    }
    if (rank == 2) return PostAndStop(shared, comm, send, recv, o);
    return FailWhileOwed(shared, comm, 2, send, recv, o, [shared] { kill(shared->pid[1], SIGKILL); },
                         std::chrono::seconds(30));
  };
  auto results = RunRanksAsProcesses(StopHarness(3), body);
  EXPECT_THAT(results[1].message(), HasSubstr("died without a report")) << results[1];
  for (int r : {0, 2}) {
    EXPECT_EQ(results[r].code(), absl::StatusCode::kUnavailable) << "rank " << r << ": " << results[r];
    EXPECT_THAT(results[r].message(), HasSubstr("peer rank 1 ")) << "rank " << r << ": " << results[r];
  }
  munmap(shared, sizeof(StopShared));
}

TEST(UcxCommunicator, RankThatNeverJoinsFailsBootstrapNamingIt) {
  auto port = PickFreePort();
  ASSERT_TRUE(port.ok());
  std::vector<absl::Status> results(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {  // rank 3 of 4 never starts
    threads.emplace_back([&, r] {
      CommunicatorOptions o;
      o.rank = r;
      o.world_size = 4;
      o.master_port = *port;
      o.timeout = std::chrono::milliseconds(1500);
      results[r] = CreateCommunicator(o).status();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(results[r].code(), absl::StatusCode::kDeadlineExceeded) << results[r];
    EXPECT_THAT(results[r].message(), HasSubstr("rank(s) 3 of 4 did not join")) << results[r];
  }
}

}  // namespace
}  // namespace athanor
