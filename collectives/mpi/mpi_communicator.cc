#include "collectives/mpi/mpi_communicator.h"

#include <mpi.h>
#include <sched.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <cstring>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives/local_communicator.h"
#include "collectives/reduce/reduce_kernels.h"
#include "common/logging.h"

namespace athanor {
namespace {

std::mutex g_mpi_mu;  // serialises every MPI call of this process

absl::Status MpiError(const std::string& what, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return absl::InternalError(absl::StrCat("mpi: ", what, ": ", std::string(text, len)));
}

// Created once in EnsureMpi(), then read-only.
MPI_Datatype g_f16_type = MPI_DATATYPE_NULL;
MPI_Datatype g_bf16_type = MPI_DATATYPE_NULL;
MPI_Op g_half_ops[3];  // sum, max, min

template <ReduceOp kOp>
void HalfOp(void* in, void* inout, int* len, MPI_Datatype* type) {
  // The datatype handle tells f16 from bf16 (both are 2-byte contiguous types).
  DataType t = *type == g_bf16_type ? DataType::kBF16 : DataType::kF16;
  ReduceBuffers(t, kOp, inout, in, inout, *len);
}

void FinalizeAtExit() {
  std::lock_guard<std::mutex> lock(g_mpi_mu);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

absl::Status EnsureMpi() {
  static absl::Status status = [] {
    std::lock_guard<std::mutex> lock(g_mpi_mu);
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
      if (rc != MPI_SUCCESS) return MpiError("MPI_Init_thread", rc);
      std::atexit(FinalizeAtExit);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Type_contiguous(2, MPI_BYTE, &g_f16_type);
    MPI_Type_commit(&g_f16_type);
    MPI_Type_contiguous(2, MPI_BYTE, &g_bf16_type);
    MPI_Type_commit(&g_bf16_type);
    MPI_Op_create(&HalfOp<ReduceOp::kSum>, 1, &g_half_ops[0]);
    MPI_Op_create(&HalfOp<ReduceOp::kMax>, 1, &g_half_ops[1]);
    MPI_Op_create(&HalfOp<ReduceOp::kMin>, 1, &g_half_ops[2]);
    return absl::OkStatus();
  }();
  return status;
}

MPI_Datatype MpiType(DataType t) {
  switch (t) {
    case DataType::kF32: return MPI_FLOAT;
    case DataType::kF16: return g_f16_type;
    case DataType::kBF16: return g_bf16_type;
    case DataType::kI32: return MPI_INT32_T;
    case DataType::kI64: return MPI_INT64_T;
  }
  return MPI_BYTE;
}

MPI_Op MpiOp(DataType t, ReduceOp op) {
  bool half = t == DataType::kF16 || t == DataType::kBF16;
  switch (op) {
    case ReduceOp::kMax: return half ? g_half_ops[1] : MPI_MAX;
    case ReduceOp::kMin: return half ? g_half_ops[2] : MPI_MIN;
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return half ? g_half_ops[0] : MPI_SUM;
  }
  return MPI_SUM;
}

// A posted MPI request plus what to do locally once it completes.
class MpiWork final : public Work {
 public:
  MpiWork(MPI_Request request, std::string what, std::function<void()> on_done)
      : request_(request), what_(std::move(what)), on_done_(std::move(on_done)) {}

  absl::Status Wait(std::chrono::milliseconds timeout) override {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (int idle = 0;; ++idle) {
      if (Done()) return status_;
      if (std::chrono::steady_clock::now() > deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat("mpi: ", what_, " not done after ", timeout.count(), " ms"));
      }
      if (idle >= 16) sched_yield();
    }
  }

  bool Done() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return true;
    int flag = 0;
    int rc;
    {
      std::lock_guard<std::mutex> mpi_lock(g_mpi_mu);
      rc = MPI_Test(&request_, &flag, MPI_STATUS_IGNORE);
    }
    if (rc != MPI_SUCCESS) {
      status_ = MpiError(what_, rc);
      done_ = true;
    } else if (flag) {
      if (on_done_) on_done_();
      done_ = true;
    }
    return done_;
  }

 private:
  std::mutex mu_;
  MPI_Request request_;
  const std::string what_;
  std::function<void()> on_done_;
  bool done_ = false;
  absl::Status status_;
};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(int rank, int size, MPI_Comm comm) : rank_(rank), size_(size), comm_(comm) {}
  ~MpiCommunicator() override {
    std::lock_guard<std::mutex> lock(g_mpi_mu);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  std::string backend() const override { return "mpi"; }

  std::unique_ptr<Work> AllReduceAsync(const void* send, void* recv, size_t count, DataType type,
                                       ReduceOp op, const CollectiveOptions&) override {
    return Post("all-reduce", [&](MPI_Request* req) {
      return MPI_Iallreduce(send == recv ? MPI_IN_PLACE : send, recv, static_cast<int>(count),
                            MpiType(type), MpiOp(type, op), comm_, req);
    }, Avg(type, op, recv, count));
  }

  std::unique_ptr<Work> ReduceScatterAsync(const void* send, void* recv, size_t recv_count,
                                           DataType type, ReduceOp op,
                                           const CollectiveOptions&) override {
    const size_t bytes = recv_count * DataTypeSize(type);
    const char* s = static_cast<const char*>(send);
    char* r = static_cast<char*>(recv);
    bool overlap = r < s + bytes * size_ && s < r + bytes;
    if (!overlap) {
      return Post("reduce-scatter", [&](MPI_Request* req) {
        return MPI_Ireduce_scatter_block(send, recv, static_cast<int>(recv_count), MpiType(type),
                                         MpiOp(type, op), comm_, req);
      }, Avg(type, op, recv, recv_count));
    }
    // MPI forbids aliasing: reduce into a temporary block, then copy.
    auto tmp = std::make_shared<std::vector<char>>(bytes);
    auto scale = Avg(type, op, tmp->data(), recv_count);
    return Post("reduce-scatter", [&](MPI_Request* req) {
      return MPI_Ireduce_scatter_block(send, tmp->data(), static_cast<int>(recv_count),
                                       MpiType(type), MpiOp(type, op), comm_, req);
    }, [tmp, recv, bytes, scale] {
      if (scale) scale();
      std::memcpy(recv, tmp->data(), bytes);
    });
  }

  std::unique_ptr<Work> AllGatherAsync(const void* send, void* recv, size_t send_count,
                                       DataType type, const CollectiveOptions&) override {
    const size_t bytes = send_count * DataTypeSize(type);
    bool in_place = static_cast<const char*>(send) == static_cast<char*>(recv) + rank_ * bytes;
    return Post("all-gather", [&](MPI_Request* req) {
      return MPI_Iallgather(in_place ? MPI_IN_PLACE : send, static_cast<int>(send_count),
                            MpiType(type), recv, static_cast<int>(send_count), MpiType(type),
                            comm_, req);
    }, nullptr);
  }

  std::unique_ptr<Work> BroadcastAsync(void* buffer, size_t count, DataType type, int root,
                                       const CollectiveOptions&) override {
    if (root < 0 || root >= size_) {
      return MakeDoneWork(absl::InvalidArgumentError(
          absl::StrCat("broadcast root ", root, " is not a rank of ", size_)));
    }
    return Post("broadcast", [&](MPI_Request* req) {
      return MPI_Ibcast(buffer, static_cast<int>(count), MpiType(type), root, comm_, req);
    }, nullptr);
  }

  std::unique_ptr<Work> BarrierAsync(const CollectiveOptions&) override {
    return Post("barrier", [&](MPI_Request* req) { return MPI_Ibarrier(comm_, req); }, nullptr);
  }

  void Abort() override {
    aborted_ = true;
    ATHANOR_LOG(ERROR) << "mpi: Abort() on rank " << rank_ << ": MPI_Abort ends the whole job";
    std::lock_guard<std::mutex> lock(g_mpi_mu);
    MPI_Abort(comm_, 1);
  }

 private:
  std::function<void()> Avg(DataType type, ReduceOp op, void* buf, size_t count) {
    if (op != ReduceOp::kAvg) return nullptr;
    int n = size_;
    return [type, buf, count, n] { ScaleForAvg(type, buf, count, n); };
  }

  std::unique_ptr<Work> Post(const char* what, const std::function<int(MPI_Request*)>& start,
                             std::function<void()> on_done) {
    if (aborted_) return MakeDoneWork(absl::AbortedError("mpi: communicator aborted"));
    MPI_Request req;
    int rc;
    {
      std::lock_guard<std::mutex> lock(g_mpi_mu);
      rc = start(&req);
    }
    if (rc != MPI_SUCCESS) return MakeDoneWork(MpiError(what, rc));
    return std::make_unique<MpiWork>(req, what, std::move(on_done));
  }

  const int rank_, size_;
  MPI_Comm comm_;
  std::atomic<bool> aborted_{false};
};

}  // namespace

bool StartedByMpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr;
}

absl::StatusOr<std::unique_ptr<Communicator>> CreateMpiCommunicator(
    const CommunicatorOptions& options) {
  if (!StartedByMpirun()) {
    return absl::FailedPreconditionError(
        "backend 'mpi' needs the ranks to be started by mpirun (no OMPI_COMM_WORLD_SIZE / "
        "PMIX_RANK in the environment); it does not bootstrap over the TCP store. "
        "Use mpirun -np N, or backend 'ucx'.");
  }
  absl::Status s = EnsureMpi();
  if (!s.ok()) return s;
  int rank = 0, size = 0;
  MPI_Comm comm;
  {
    std::lock_guard<std::mutex> lock(g_mpi_mu);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  }
  if (rank != options.rank || size != options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mpi: MPI says rank ", rank, " of ", size, " but the options say rank ", options.rank,
        " of ", options.world_size));
  }
  return std::unique_ptr<Communicator>(std::make_unique<MpiCommunicator>(rank, size, comm));
}

}  // namespace athanor
