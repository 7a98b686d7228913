// ShmAllReduce on its own, without UcxCommunicator: each rank (a thread)
// builds a UCX context, worker and endpoints, maps the segments, and runs the
// all-reduce cases of the conformance suite and the concurrent-tags check
// through a minimal Communicator whose AllReduce is ShmAllReduce and nothing
// else (every size, however small, takes the shared-memory path).
#include "collectives/ucx/shm_all_reduce.h"

#include <list>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "collectives/local_communicator.h"
#include "collectives/testing/conformance.h"
#include "collectives/testing/rank_harness.h"
#include "collectives/ucx/ucx_worker.h"
#include "common/status.h"
#include "gtest/gtest.h"

namespace athanor {
namespace ucx_internal {
namespace {

#define RETURN_IF_ERROR_WORK(expr)         \
  do {                                     \
    absl::Status s_ = (expr);              \
    if (!s_.ok()) return MakeDoneWork(s_); \
  } while (0)

// All-reduce only; thread-safe through one mutex (waiters progress every op).
class ShmOnlyCommunicator final : public Communicator {
 public:
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(const CommunicatorOptions& o) {
    auto c = std::unique_ptr<ShmOnlyCommunicator>(new ShmOnlyCommunicator(o));
    RETURN_IF_ERROR(c->Init());
    return std::unique_ptr<Communicator>(std::move(c));
  }
  ~ShmOnlyCommunicator() override {
    if (store_ != nullptr) {
      // Nobody unmaps a segment a peer may still read.
      auto n = store_->Add("shm-test/finished", 1);
      if (n.ok() && *n == o_.world_size) (void)store_->Set("shm-test/all", "1");
      (void)store_->Get("shm-test/all", o_.timeout);
    }
    if (shm_ != nullptr) shm_->ReleaseKeys();
    ucx_internal::CloseEndpoints(worker_, eps_);
    if (worker_ != nullptr) ucp_worker_destroy(worker_);
    shm_.reset();
    if (context_ != nullptr) ucp_cleanup(context_);
    store_.reset();
    server_.reset();
  }

  int rank() const override { return o_.rank; }
  int world_size() const override { return o_.world_size; }
  std::string backend() const override { return "shm"; }

  std::unique_ptr<Work> AllReduceAsync(const void* send, void* recv, size_t count, DataType type,
                                       ReduceOp op, const CollectiveOptions& options) override {
    auto shm_op = std::make_shared<ShmOp>();
    shm_op->send = static_cast<const char*>(send);
    shm_op->recv = static_cast<char*>(recv);
    shm_op->count = count;
    shm_op->type = type;
    shm_op->op = op;
    shm_op->user_tag = options.tag;
    std::lock_guard<std::mutex> lock(mu_);
    RETURN_IF_ERROR_WORK(shm_->Submit(shm_op.get()));
    pending_.push_back({shm_op, false});
    return std::make_unique<ShmWork>(this, shm_op.get());
  }
  std::unique_ptr<Work> ReduceScatterAsync(const void*, void*, size_t, DataType, ReduceOp,
                                           const CollectiveOptions&) override {
    return MakeDoneWork(absl::UnimplementedError("all-reduce only"));
  }
  std::unique_ptr<Work> AllGatherAsync(const void*, void*, size_t, DataType,
                                       const CollectiveOptions&) override {
    return MakeDoneWork(absl::UnimplementedError("all-reduce only"));
  }
  std::unique_ptr<Work> BroadcastAsync(void*, size_t, DataType, int,
                                       const CollectiveOptions&) override {
    return MakeDoneWork(absl::UnimplementedError("all-reduce only"));
  }
  std::unique_ptr<Work> BarrierAsync(const CollectiveOptions&) override {
    return MakeDoneWork(absl::UnimplementedError("all-reduce only"));
  }
  void Abort() override {}

 private:
  class ShmWork final : public Work {
   public:
    ShmWork(ShmOnlyCommunicator* c, const ShmOp* op) : c_(c), op_(op) {}
    absl::Status Wait(std::chrono::milliseconds timeout) override { return c_->WaitFor(op_, timeout); }
    ~ShmWork() override { c_->Forget(op_); }
    bool Done() override {
      return c_->WaitFor(op_, std::chrono::milliseconds(0)).code() !=
             absl::StatusCode::kDeadlineExceeded;
    }

   private:
    ShmOnlyCommunicator* c_;
    const ShmOp* op_;
  };
  struct Entry {
    std::shared_ptr<ShmOp> op;
    bool done;
    absl::Status status;
  };

  explicit ShmOnlyCommunicator(const CommunicatorOptions& o) : o_(o) {}

  absl::Status Init() {
    if (o_.rank == 0) {
      ASSIGN_OR_RETURN(server_, TcpStoreServer::Start(o_.master_addr, o_.master_port, {}));
    }
    ASSIGN_OR_RETURN(store_, TcpStoreClient::Connect(o_.master_addr, o_.master_port, o_.timeout, ""));
    ucp_config_t* config = nullptr;
    if (ucp_config_read(nullptr, nullptr, &config) != UCS_OK) return absl::InternalError("config");
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_TAG | UCP_FEATURE_RMA;
    ucs_status_t s = ucp_init(&params, config, &context_);
    ucp_config_release(config);
    if (s != UCS_OK) return absl::InternalError("ucp_init");
    ucp_worker_params_t wparams{};
    if (ucp_worker_create(context_, &wparams, &worker_) != UCS_OK) return absl::InternalError("worker");
    ucp_address_t* address = nullptr;
    size_t len = 0;
    if (ucp_worker_get_address(worker_, &address, &len) != UCS_OK) return absl::InternalError("address");
    std::string mine(reinterpret_cast<const char*>(address), len);
    ucp_worker_release_address(worker_, address);
    ASSIGN_OR_RETURN(std::vector<std::string> all,
                     AllGatherThroughStore(store_.get(), "shm-test/address", o_.rank,
                                           o_.world_size, mine, o_.timeout));
    ShmAllReduce::Options so;
    so.index = o_.rank;
    eps_.assign(o_.world_size, nullptr);
    for (int q = 0; q < o_.world_size; ++q) {
      so.ranks.push_back(q);
      if (q == o_.rank) continue;
      ucp_ep_params_t ep{};
      ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
      ep.address = reinterpret_cast<const ucp_address_t*>(all[q].data());
      if (ucp_ep_create(worker_, &ep, &eps_[q]) != UCS_OK) return absl::InternalError("ep");
    }
    so.eps = eps_;
    ASSIGN_OR_RETURN(shm_, ShmAllReduce::Create(context_, so, store_.get(), "shm-test/key",
                                                o_.timeout));
    if (!shm_->why_not().empty()) return absl::FailedPreconditionError(shm_->why_not());
    return absl::OkStatus();
  }

  absl::Status WaitFor(const ShmOp* op, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        ucp_worker_progress(worker_);
        for (Entry& e : pending_) {
          if (e.done) continue;
          absl::StatusOr<bool> done = shm_->Advance(e.op.get());
          e.done = !done.ok() || *done;
          if (!done.ok()) e.status = done.status();
        }
        for (const Entry& e : pending_) {
          if (e.op.get() == op && e.done) return e.status;
        }
      }
      if (std::chrono::steady_clock::now() > deadline) {
        return absl::DeadlineExceededError("shm all-reduce not done");
      }
      std::this_thread::yield();
    }
  }

  void Forget(const ShmOp* op) {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.remove_if([op](const Entry& e) { return e.op.get() == op; });
  }

  const CommunicatorOptions o_;
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<TcpStoreClient> store_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::vector<ucp_ep_h> eps_;
  std::unique_ptr<ShmAllReduce> shm_;
  std::mutex mu_;
  std::list<Entry> pending_;  // guarded by mu_
};

class ShmAllReduceDirect : public ::testing::TestWithParam<int> {};

TEST_P(ShmAllReduceDirect, ConformanceAndConcurrentTags) {
  HarnessOptions h;
  h.world_size = GetParam();
  h.create = ShmOnlyCommunicator::Create;
  ConformanceOptions c;
  auto results = RunRanksAsThreads(h, [&](int, Communicator* comm) -> absl::Status {
    EXPECT_EQ(comm->backend(), "shm");
    RETURN_IF_ERROR(RunAllReduceConformance(comm, c));
    return RunConcurrentTags(comm);
  });
  for (size_t r = 0; r < results.size(); ++r) {
    EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, ShmAllReduceDirect, ::testing::Values(2, 3));

}  // namespace
}  // namespace ucx_internal
}  // namespace athanor
