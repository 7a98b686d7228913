#include "collectives/ucx/shm_pending_op.h"

#include "absl/strings/str_cat.h"
#include "collectives/local_communicator.h"
#include "common/status.h"

namespace athanor {
namespace ucx_internal {

void ShmPendingOp::Advance(OpEngine* engine) {
  engine->mu().AssertHeld();  // the engine calls every PendingOp under its lock
  const uint64_t moves = shm_->moves();
  absl::StatusOr<bool> done = shm_->Advance(&op_);
  if (shm_->moves() != moves) NoteMove();
  if (!done.ok()) {
    engine->SetError(done.status());
    return engine->Fail(this, engine->error());
  }
  if (*done) Finish();
}

std::unique_ptr<Work> SubmitShm(OpEngine* engine, ShmAllReduce* shm, bool numbered,
                                const void* send, void* recv, size_t count, DataType type,
                                ReduceOp op, const CollectiveOptions& options) {
  auto pending = std::make_shared<ShmPendingOp>(shm, options);
  ShmOp& shared = pending->op();
  shared.send = static_cast<const char*>(send);
  shared.recv = static_cast<char*>(recv);
  shared.count = count;
  shared.type = type;
  shared.op = op;
  shared.user_tag = options.tag;
  StdMutexLock lock(&engine->mu());
  if (!engine->error().ok()) return MakeDoneWork(engine->error());
  // Tags of its messages between hosts, numbered as the tag-message paths do.
  if (numbered) shared.net_tag = engine->NextTagBase(options.tag);
  absl::Status s = shm->Submit(&shared);
  if (!s.ok()) {
    engine->SetError(s);
    return MakeDoneWork(engine->error());
  }
  return engine->Enqueue(std::move(pending));
}

absl::StatusOr<std::unique_ptr<ShmAllReduce>> CreateAgreedShm(
    ucp_context_h context, const ShmAllReduce::Options& options, TcpStoreClient* store,
    const std::string& prefix, int rank, int world_size, std::chrono::milliseconds timeout,
    std::string* why_not) {
  ASSIGN_OR_RETURN(std::unique_ptr<ShmAllReduce> shm,
                   ShmAllReduce::Create(context, options, store, prefix, timeout));
  // Every rank must take the same path for the same call: all agree, and
  // across hosts the chunks must be cut alike.
  const std::string mine = shm->why_not().empty()
                               ? absl::StrCat("ok ", shm->chunk_bytes(), " ", shm->slots())
                               : shm->why_not();
  ASSIGN_OR_RETURN(std::vector<std::string> verdicts,
                   AllGatherThroughStore(store, "ucx/shm/ok", rank, world_size, mine, timeout));
  why_not->clear();
  for (int q = 0; q < world_size && why_not->empty(); ++q) {
    if (verdicts[q] != verdicts[0]) {
      *why_not = absl::StrCat("rank ", q, ": ", verdicts[q], "; rank 0: ", verdicts[0]);
    }
  }
  if (why_not->empty() && verdicts[0].rfind("ok ", 0) != 0) *why_not = verdicts[0];
  if (!why_not->empty()) return nullptr;
  return shm;
}

}  // namespace ucx_internal
}  // namespace athanor
