#include "collectives/nccl/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <sched.h>

#include <atomic>
#include <cstring>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "collectives/bootstrap/tcp_store.h"
#include "collectives/local_communicator.h"
#include "common/logging.h"
#include "common/status.h"

namespace athanor {
namespace {

using SteadyTime = std::chrono::steady_clock::time_point;

absl::Status NcclError(const std::string& what, ncclResult_t r) {
  return absl::InternalError(absl::StrCat("nccl: ", what, ": ", ncclGetErrorString(r)));
}

absl::Status CudaError(const std::string& what, cudaError_t e) {
  return absl::InternalError(absl::StrCat("cuda: ", what, ": ", cudaGetErrorString(e)));
}

ncclDataType_t NcclType(DataType t) {
  switch (t) {
    case DataType::kF32: return ncclFloat32;
    case DataType::kF16: return ncclFloat16;
    case DataType::kBF16: return ncclBfloat16;
    case DataType::kI32: return ncclInt32;
    case DataType::kI64: return ncclInt64;
  }
  return ncclFloat32;
}

ncclRedOp_t NcclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kAvg: return ncclAvg;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kMin: return ncclMin;
  }
  return ncclSum;
}

// Polls a non-blocking communicator until its last call left ncclInProgress.
// DeadlineExceeded past `deadline`, Aborted once `abort_requested` is set; it
// never aborts the communicator itself: the caller owns that (once).
absl::Status AwaitComm(ncclComm_t comm, SteadyTime deadline, const std::string& what,
                       const std::atomic<bool>* abort_requested) {
  for (int idle = 0;; ++idle) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess) return NcclError(what, r);
    if (state == ncclSuccess) return absl::OkStatus();
    if (state != ncclInProgress) return NcclError(what, state);
    if (abort_requested != nullptr && abort_requested->load()) {
      return absl::AbortedError(absl::StrCat("nccl: ", what, " interrupted by Abort()"));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat("nccl: ", what, " timed out; communicator aborted"));
    }
    if (idle >= 16) sched_yield();
  }
}

class NcclCommunicator;

class NcclWork final : public Work {
 public:
  NcclWork(NcclCommunicator* comm, cudaEvent_t event, std::string what, SteadyTime deadline)
      : comm_(comm), event_(event), what_(std::move(what)), deadline_(deadline) {}
  ~NcclWork() override { cudaEventDestroy(event_); }
  absl::Status Wait(std::chrono::milliseconds timeout) override;
  bool Done() override;

 private:
  NcclCommunicator* comm_;  // not owned; outlives this Work
  cudaEvent_t event_;
  const std::string what_;
  const SteadyTime deadline_;
  absl::Status status_;
  bool done_ = false;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(const CommunicatorOptions& options, NcclTuning tuning)
      : options_(options), tuning_(std::move(tuning)) {}
  ~NcclCommunicator() override {
    if (comm_ != nullptr) {
      // Finalize flushes outstanding work; if that fails or outlives the
      // timeout, the communicator can only be aborted, never destroyed.
      ncclResult_t r = ncclCommFinalize(comm_);
      absl::Status s = r == ncclSuccess || r == ncclInProgress
                           ? AwaitComm(comm_, std::chrono::steady_clock::now() + options_.timeout,
                                       "finalize", nullptr)
                           : NcclError("ncclCommFinalize", r);
      if (s.ok()) {
        ncclCommDestroy(comm_);
      } else {
        ncclCommAbort(comm_);
      }
      comm_ = nullptr;
    }
    store_.reset();
    if (server_ != nullptr) {
      server_->Drain(std::min<std::chrono::milliseconds>(options_.timeout, std::chrono::seconds(10)));
    }
    if (barrier_buf_ != nullptr) cudaFree(barrier_buf_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  absl::Status Init() {
    int devices = CudaDeviceCount();
    if (devices == 0) return absl::FailedPreconditionError("nccl: no CUDA device");
    cudaError_t e = cudaSetDevice(options_.local_rank % devices);
    if (e != cudaSuccess) return CudaError("cudaSetDevice", e);
    device_ = options_.local_rank % devices;
    e = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
    if (e != cudaSuccess) return CudaError("cudaStreamCreate", e);
    e = cudaMalloc(&barrier_buf_, sizeof(int));
    if (e != cudaSuccess) return CudaError("cudaMalloc", e);
    if (options_.rank == 0) {
      ASSIGN_OR_RETURN(server_, TcpStoreServer::Start(options_.master_addr, options_.master_port,
                                                      {.secret = options_.rendezvous_secret,
                                                       .listen_fd = options_.rendezvous_listen_fd}));
    }
    ASSIGN_OR_RETURN(store_, TcpStoreClient::Connect(options_.master_addr, options_.master_port,
                                                     options_.timeout, options_.rendezvous_secret));
    ncclUniqueId id;
    if (options_.rank == 0) {
      ncclResult_t r = ncclGetUniqueId(&id);
      if (r != ncclSuccess) return NcclError("ncclGetUniqueId", r);
    }
    ASSIGN_OR_RETURN(std::vector<std::string> ids,
                     AllGatherThroughStore(store_.get(), "nccl/id", options_.rank,
                                           options_.world_size,
                                           std::string(reinterpret_cast<const char*>(&id), sizeof(id)),
                                           options_.timeout));
    std::memcpy(&id, ids[0].data(), sizeof(id));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    absl::MutexLock lock(&mu_);
    ncclResult_t r = ncclCommInitRankConfig(&comm_, options_.world_size, id, options_.rank, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
      AbortLocked();
      return NcclError("ncclCommInitRankConfig", r);
    }
    absl::Status s = AwaitComm(comm_, std::chrono::steady_clock::now() + options_.timeout,
                               "ncclCommInitRankConfig", &abort_requested_);
    if (!s.ok()) AbortLocked();
    return s;
  }

  int rank() const override { return options_.rank; }
  int world_size() const override { return options_.world_size; }
  std::string backend() const override { return "nccl"; }

  std::unique_ptr<Work> AllReduceAsync(const void* send, void* recv, size_t count, DataType type,
                                       ReduceOp op, const CollectiveOptions& o) override {
    return Enqueue("all-reduce", o, [&](ncclComm_t comm) {
      return ncclAllReduce(send, recv, count, NcclType(type), NcclOp(op), comm, stream_);
    });
  }
  std::unique_ptr<Work> ReduceScatterAsync(const void* send, void* recv, size_t recv_count,
                                           DataType type, ReduceOp op,
                                           const CollectiveOptions& o) override {
    return Enqueue("reduce-scatter", o, [&](ncclComm_t comm) {
      return ncclReduceScatter(send, recv, recv_count, NcclType(type), NcclOp(op), comm, stream_);
    });
  }
  std::unique_ptr<Work> AllGatherAsync(const void* send, void* recv, size_t send_count,
                                       DataType type, const CollectiveOptions& o) override {
    return Enqueue("all-gather", o, [&](ncclComm_t comm) {
      return ncclAllGather(send, recv, send_count, NcclType(type), comm, stream_);
    });
  }
  std::unique_ptr<Work> BroadcastAsync(void* buffer, size_t count, DataType type, int root,
                                       const CollectiveOptions& o) override {
    if (root < 0 || root >= options_.world_size) {
      return MakeDoneWork(absl::InvalidArgumentError(
          absl::StrCat("broadcast root ", root, " is not a rank of ", options_.world_size)));
    }
    return Enqueue("broadcast", o, [&](ncclComm_t comm) {
      return ncclBroadcast(buffer, buffer, count, NcclType(type), root, comm, stream_);
    });
  }
  std::unique_ptr<Work> BarrierAsync(const CollectiveOptions& o) override {
    return Enqueue("barrier", o, [&](ncclComm_t comm) {
      return ncclAllReduce(barrier_buf_, barrier_buf_, 1, ncclInt32, ncclSum, comm, stream_);
    });
  }
  // Safe from any thread, also while another thread's enqueue is polling:
  // the flag stops that poll, and the lock is then free within one poll step.
  void Abort() override ABSL_LOCKS_EXCLUDED(mu_) {
    abort_requested_ = true;
    absl::MutexLock lock(&mu_);
    AbortLocked();
  }

  // For NcclWork: the communicator's asynchronous error, if any.
  absl::Status AsyncError() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (comm_ == nullptr) return absl::AbortedError("nccl: communicator aborted");
    ncclResult_t state = ncclSuccess;
    ncclCommGetAsyncError(comm_, &state);
    if (state != ncclSuccess && state != ncclInProgress) return NcclError("async error", state);
    return absl::OkStatus();
  }
  void AbortAfterTimeout() {
    ATHANOR_LOG(ERROR) << "nccl: rank " << options_.rank << ": collective timed out; aborting";
    Abort();
  }

 private:
  // The one place the communicator is aborted: afterwards comm_ is null, so
  // nothing (enqueue, async-error poll, destructor) can use it again.
  void AbortLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (comm_ != nullptr) ncclCommAbort(comm_);
    comm_ = nullptr;
  }

  std::unique_ptr<Work> Enqueue(const char* what, const CollectiveOptions& o,
                                const std::function<ncclResult_t(ncclComm_t)>& call) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (comm_ == nullptr || abort_requested_) {
      return MakeDoneWork(absl::AbortedError("nccl: communicator aborted"));
    }
    cudaSetDevice(device_);
    auto deadline = std::chrono::steady_clock::now() + o.timeout;
    ncclResult_t r = call(comm_);
    if (r == ncclInProgress) {
      if (tuning_.on_enqueue_wait) tuning_.on_enqueue_wait();
      absl::Status s = AwaitComm(comm_, deadline, what, &abort_requested_);
      if (!s.ok()) {
        AbortLocked();
        return MakeDoneWork(s);
      }
    } else if (r != ncclSuccess) {
      return MakeDoneWork(NcclError(what, r));
    }
    cudaEvent_t event;
    cudaError_t e = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventRecord(event, stream_);
    if (e != cudaSuccess) return MakeDoneWork(CudaError("cudaEventRecord", e));
    return std::make_unique<NcclWork>(this, event, absl::StrCat(what, " (tag ", o.tag, ")"), deadline);
  }

  const CommunicatorOptions options_;
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<TcpStoreClient> store_;
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  void* barrier_buf_ = nullptr;
  const NcclTuning tuning_;
  absl::Mutex mu_;  // serialises every use of comm_ (enqueue, poll, abort)
  ncclComm_t comm_ ABSL_GUARDED_BY(mu_) = nullptr;  // null once aborted
  std::atomic<bool> abort_requested_{false};        // set by Abort() before it locks
};

bool NcclWork::Done() {
  if (done_) return true;
  cudaError_t e = cudaEventQuery(event_);
  if (e == cudaSuccess) {
    done_ = true;
  } else if (e != cudaErrorNotReady) {
    status_ = CudaError(what_, e);
    done_ = true;
  } else if (absl::Status s = comm_->AsyncError(); !s.ok()) {
    status_ = s;
    done_ = true;
  } else if (std::chrono::steady_clock::now() > deadline_) {
    comm_->AbortAfterTimeout();
    status_ = absl::DeadlineExceededError(absl::StrCat("nccl: ", what_, " timed out; communicator aborted"));
    done_ = true;
  }
  return done_;
}

absl::Status NcclWork::Wait(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (int idle = 0;; ++idle) {
    if (Done()) return status_;
    if (std::chrono::steady_clock::now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat("nccl: ", what_, " not done after ",
                                                      timeout.count(), " ms"));
    }
    if (idle >= 16) sched_yield();
  }
}

}  // namespace

int CudaDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(
    const CommunicatorOptions& options, NcclTuning tuning) {
  auto comm = std::make_unique<NcclCommunicator>(options, std::move(tuning));
  absl::Status s = comm->Init();
  if (!s.ok()) return s;
  return std::unique_ptr<Communicator>(std::move(comm));
}

}  // namespace athanor
