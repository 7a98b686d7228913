#include "worker/agent/workdir_snapshot.h"

#include <chrono>
#include <filesystem>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "proto/athanor_interactive.grpc.pb.h"
#include "storage/archive.h"
#include "worker/agent/data_stream.h"

namespace athanor::agent {
namespace {

namespace fs = std::filesystem;

constexpr auto kTransferDeadline = std::chrono::hours(2);  // a stalled stream ends with it

class CoordinatorWorkdirTransport : public WorkdirTransport {
 public:
  explicit CoordinatorWorkdirTransport(std::shared_ptr<grpc::Channel> channel)
      : stub_(rpc::WorkdirData::NewStub(std::move(channel))) {}

  absl::Status Store(const RankKey& rank, const std::string& key, const std::string& tar_path,
                     const std::string& digest, int64_t size_bytes) override {
    rpc::StoreWorkdirChunk head;
    rpc::StoreWorkdirHeader* h = head.mutable_header();
    h->set_job_id(rank.job_id);
    h->set_attempt(rank.attempt);
    h->set_rank(rank.rank);
    h->set_key(key);
    h->set_size_bytes(size_bytes);
    h->set_digest(digest);
    rpc::StoreWorkdirResponse resp;
    return SendFile(tar_path, kTransferDeadline, head,
                    [&](grpc::ClientContext* ctx) { return stub_->StoreWorkdir(ctx, &resp); });
  }

  absl::Status Fetch(const RankKey& rank, const std::string& key, const std::string& tar_path,
                     int64_t max_bytes) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kTransferDeadline);
    rpc::FetchWorkdirRequest req;
    req.set_job_id(rank.job_id);
    req.set_attempt(rank.attempt);
    req.set_rank(rank.rank);
    req.set_key(key);
    std::unique_ptr<grpc::ClientReader<rpc::DataChunk>> reader = stub_->FetchWorkdir(&ctx, req);
    absl::StatusOr<int> fd = CreateToReceive(tar_path);
    absl::Status status = fd.status();
    if (status.ok()) {
      status = ReceivePieces(reader.get(), *fd, tar_path, [&](const rpc::DataChunk& chunk, int64_t total) {
                 if (chunk.data().size() <= kMaxDataChunk && total <= max_bytes) return absl::OkStatus();
                 return absl::ResourceExhaustedError(absl::StrCat("the work folder passes ", max_bytes, " bytes"));
               }).status();
    }
    if (!status.ok()) ctx.TryCancel();
    grpc::Status s = reader->Finish();
    if (fd.ok()) {
      absl::Status closed = CloseFile(*fd, tar_path);
      if (status.ok()) status = closed;
    }
    return status.ok() && !s.ok() ? FromGrpc(s, "the coordinator") : status;  // ours first
  }

 private:
  std::unique_ptr<rpc::WorkdirData::Stub> stub_;
};

}  // namespace

std::unique_ptr<WorkdirTransport> MakeCoordinatorWorkdirTransport(const std::string& coordinator,
                                                                  const std::optional<security::TlsMaterial>& tls) {
  return std::make_unique<CoordinatorWorkdirTransport>(CoordinatorDataChannel(coordinator, tls));
}

WorkdirSnapshots::WorkdirSnapshots(std::string work_dir, std::unique_ptr<WorkdirTransport> transport,
                                   std::function<uid_t(const std::string&)> uid_of)
    : work_dir_(std::move(work_dir)), transport_(std::move(transport)), uid_of_(std::move(uid_of)) {
  thread_ = std::thread([this] { Loop(); });
}

WorkdirSnapshots::~WorkdirSnapshots() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void WorkdirSnapshots::SetOnReady(std::function<void()> on_ready) {
  absl::MutexLock lock(&call_mu_);
  on_ready_ = std::move(on_ready);
}

WorkdirSnapshots::Lookup WorkdirSnapshots::AcquireRestore(const RankTarget& target) {
  Lookup out;
  if (target.restore_key.empty()) return out;
  absl::MutexLock lock(&mu_);
  auto [it, added] = restores_.try_emplace(target.key);
  if (added) {
    it->second.key = target.restore_key;
    it->second.tenant = target.tenant.empty() ? "default" : target.tenant;
    queue_.push_back(target.key);
  }
  out.state = it->second.state;
  out.error = it->second.error;
  return out;
}

void WorkdirSnapshots::Forget(const RankKey& key) {
  absl::MutexLock lock(&mu_);
  auto it = restores_.find(key);
  if (it != restores_.end() && it->second.state != Lookup::kPending) restores_.erase(it);
}

void WorkdirSnapshots::Loop() {
  for (;;) {
    RankKey key;
    Restore what;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (stop_) return;
      key = queue_.front();
      queue_.pop_front();
      what = restores_[key];
    }
    absl::Status s = FetchInto(key, what);
    if (s.ok()) {
      ATHANOR_LOG(INFO) << "job " << key.job_id << " rank " << key.rank << ": work folder restored from "
                        << what.key;
    } else {
      ATHANOR_LOG(WARNING) << "job " << key.job_id << " rank " << key.rank << ": cannot restore its work folder ("
                           << what.key << "): " << s;
    }
    {
      absl::MutexLock lock(&mu_);
      Restore& r = restores_[key];
      r.state = s.ok() ? Lookup::kReady : Lookup::kFailed;
      r.error = s.ok() ? "" : absl::StrCat("cannot restore the work folder from snapshot key ", what.key, ": ",
                                           s.message());
    }
    absl::MutexLock call(&call_mu_);
    if (on_ready_) on_ready_();
  }
}

absl::Status WorkdirSnapshots::FetchInto(const RankKey& rank, const Restore& what) {
  ASSIGN_OR_RETURN(std::string dir, RankSupervisor::RankDir(work_dir_, rank));
  std::error_code ec;
  if (fs::exists(dir, ec)) return absl::OkStatus();  // unpacked already (an agent restart)
  fs::create_directories(fs::path(dir).parent_path(), ec);
  if (ec) return absl::InternalError(absl::StrCat("create ", fs::path(dir).parent_path().string(), ": ", ec.message()));
  const std::string tar = dir + ".restore.tar";
  fs::remove(tar, ec);
  absl::Status s = transport_->Fetch(rank, what.key, tar, kMaxRestoreBytes);
  if (s.ok()) {
    storage::UnpackOptions options;
    options.owner_uid = uid_of_(what.tenant);
    options.max_bytes = kMaxRestoreBytes;
    options.max_entries = kMaxRestoreEntries;
    s = storage::UnpackTree(tar, dir, options);
  }
  fs::remove(tar, ec);
  return s;
}

absl::Status WorkdirSnapshots::Store(const RankKey& rank, const std::string& dir, const std::string& key) {
  const std::string tar = dir + ".snapshot.tar";
  ASSIGN_OR_RETURN(storage::PackResult packed, storage::PackTree(dir, tar));
  absl::Status s = transport_->Store(rank, key, tar, packed.digest, packed.bytes);
  std::error_code ec;
  fs::remove(tar, ec);
  return s;
}

}  // namespace athanor::agent
