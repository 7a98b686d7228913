// The ucx backend's progress thread: an async all-reduce finishes with no
// thread in Wait or Done, and an idle communicator does not spin.
#include <time.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives/testing/rank_harness.h"
#include "collectives/ucx/ucx_communicator.h"
#include "common/status.h"
#include "gtest/gtest.h"

namespace athanor {
namespace {

constexpr uint64_t kTag = 77;

struct Completion {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  absl::Status status;
};

double ProcessCpuMs() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

HarnessOptions WithCompletionHook(int world, std::vector<Completion>* completions) {
  HarnessOptions h;
  h.world_size = world;
  h.timeout = std::chrono::seconds(30);
  h.create = [completions](const CommunicatorOptions& o) {
    UcxTuning t;
    Completion* c = &(*completions)[o.rank];
    t.on_done = [c](uint64_t tag, const absl::Status& status) {
      if (tag != kTag) return;
      std::lock_guard<std::mutex> lock(c->mu);
      c->done = true;
      c->status = status;
      c->cv.notify_all();
    };
    CommunicatorOptions with_tuning = o;
    with_tuning.ucx = t;
    return CreateUcxCommunicator(with_tuning);
  };
  return h;
}

TEST(UcxProgressThread, AsyncAllReduceFinishesWithNoWaiter) {
  for (int world : {2, 3}) {
    std::vector<Completion> completions(world);
    HarnessOptions h = WithCompletionHook(world, &completions);
    std::vector<absl::Status> results =
        RunRanksAsThreads(h, [&](int rank, Communicator* comm) -> absl::Status {
          // 4 MiB of f32: a ring of many pipelined segments, far more than
          // the call itself posts.
          const size_t count = 1 << 20;
          std::vector<float> send(count), recv(count, -1.0f);
          for (size_t i = 0; i < count; ++i) send[i] = static_cast<float>(rank + 1 + i % 3);
          CollectiveOptions co;
          co.tag = kTag;
          std::unique_ptr<Work> work =
              comm->AllReduceAsync(send.data(), recv.data(), count, DataType::kF32,
                                   ReduceOp::kSum, co);
          // Nobody calls Wait or Done: only the progress thread can finish it.
          Completion& c = completions[rank];
          {
            std::unique_lock<std::mutex> lock(c.mu);
            if (!c.cv.wait_for(lock, std::chrono::seconds(30), [&] { return c.done; })) {
              return absl::DeadlineExceededError("all-reduce made no progress without a waiter");
            }
            RETURN_IF_ERROR(c.status);
          }
          RETURN_IF_ERROR(work->Wait(std::chrono::milliseconds(0)));
          const float base = static_cast<float>(world * (world + 1) / 2);
          for (size_t i = 0; i < count; ++i) {
            const float want = base + static_cast<float>(world * (i % 3));
            if (recv[i] != want) {
              return absl::InternalError(absl::StrCat("element ", i, " is ", recv[i], ", want ", want));
            }
          }
          return absl::OkStatus();
        });
    for (int r = 0; r < world; ++r) {
      EXPECT_TRUE(results[r].ok()) << "world " << world << " rank " << r << ": " << results[r];
    }
  }
}

TEST(UcxProgressThread, IdleCommunicatorDoesNotSpin) {
  std::vector<Completion> completions(2);
  HarnessOptions h = WithCompletionHook(2, &completions);
  double idle_cpu_ms = -1;
  std::vector<absl::Status> results =
      RunRanksAsThreads(h, [&](int rank, Communicator* comm) -> absl::Status {
        RETURN_IF_ERROR(comm->Barrier());
        // Both ranks idle for 300 ms (a timed wait nobody ends: this is the
        // measurement window, not synchronisation).
        std::mutex mu;
        std::condition_variable cv;
        std::unique_lock<std::mutex> lock(mu);
        const double before = ProcessCpuMs();
        cv.wait_for(lock, std::chrono::milliseconds(300), [] { return false; });
        if (rank == 0) idle_cpu_ms = ProcessCpuMs() - before;
        return comm->Barrier();
      });
  for (const auto& s : results) EXPECT_TRUE(s.ok()) << s;
  // Two progress threads spinning would burn ~300-600 ms; sleeping ones ~0.
  // The same measurement of one thread spinning for as long exceeds the bound,
  // so the bound can fail.
  const double spin_before = ProcessCpuMs();
  for (auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
       std::chrono::steady_clock::now() < end;) {
  }
  EXPECT_GT(ProcessCpuMs() - spin_before, 60.0);
  ASSERT_GE(idle_cpu_ms, 0.0) << "rank 0 never measured";
  EXPECT_LT(idle_cpu_ms, 60.0);
}

}  // namespace
}  // namespace athanor
