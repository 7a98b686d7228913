#include "collectives/ucx/tag_schedule_path.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "collectives/local_communicator.h"
#include "collectives/ucx/tag_op.h"

namespace athanor {
namespace ucx_internal {

TagSchedulePath::TagSchedulePath(OpEngine* engine, const UcxWorker* ucx, int rank, int world_size,
                                 const UcxTuning& tuning)
    : engine_(engine),
      ucx_(ucx),
      rank_(rank),
      world_size_(world_size),
      window_(static_cast<size_t>(tuning.window)),
      segment_bytes_(tuning.segment_bytes),
      small_bytes_(tuning.small_bytes) {}

TagSchedulePath::~TagSchedulePath() {
  for (char* p : all_scratch_) free(p);
}

char* TagSchedulePath::AcquireScratch(size_t bytes) {
  size_t best = free_scratch_.size();
  for (size_t i = 0; i < free_scratch_.size(); ++i) {
    if (free_scratch_[i].first >= bytes &&
        (best == free_scratch_.size() || free_scratch_[i].first < free_scratch_[best].first)) {
      best = i;
    }
  }
  if (best < free_scratch_.size()) {
    char* p = free_scratch_[best].second;
    free_scratch_[best] = free_scratch_.back();
    free_scratch_.pop_back();
    return p;
  }
  char* p = static_cast<char*>(aligned_alloc(4096, (bytes + 4095) / 4096 * 4096));
  all_scratch_.push_back(p);
  return p;
}

void TagSchedulePath::ReleaseScratch(size_t bytes, char* scratch) {
  free_scratch_.emplace_back(bytes, scratch);
}

ScheduleParams TagSchedulePath::Params(DataType type, ReduceOp op, size_t block_bytes) const {
  ScheduleParams p;
  p.rank = rank_;
  p.world_size = world_size_;
  p.type = type;
  p.op = op;
  p.window = static_cast<int>(window_);
  p.segment_bytes = segment_bytes_;
  p.segment_bytes = SegmentBytesFor(block_bytes, p);
  return p;
}

template <typename Build>
std::unique_ptr<Work> TagSchedulePath::Submit(ScheduleParams params, size_t scratch_bytes,
                                              DataType type, ReduceOp op, const char* what,
                                              const CollectiveOptions& options, Build build) {
  auto pending = std::make_shared<TagOp>(this, what, type, op, options);
  StdMutexLock lock(&engine_->mu());
  if (!engine_->error().ok()) return MakeDoneWork(engine_->error());
  char* scratch = nullptr;
  if (scratch_bytes > 0) params.scratch = scratch = AcquireScratch(scratch_bytes);
  pending->Start(build(params), engine_->NextTagBase(options.tag), scratch, scratch_bytes);
  return engine_->Enqueue(std::move(pending));
}

std::unique_ptr<Work> TagSchedulePath::RecursiveDoubling(const void* send, void* recv, size_t count,
                                                         DataType type, ReduceOp op,
                                                         const CollectiveOptions& options) {
  const size_t bytes = count * DataTypeSize(type);
  return Submit(Params(type, op, bytes), std::max<size_t>(bytes, 64), type, op, "all-reduce",
                options, [&](const ScheduleParams& p) {
                  return RecursiveDoublingAllReduce(p, send, recv, count);
                });
}

std::unique_ptr<Work> TagSchedulePath::Ring(const void* send, void* recv, size_t count,
                                            DataType type, ReduceOp op,
                                            const CollectiveOptions& options) {
  const size_t bytes = count * DataTypeSize(type);
  ScheduleParams p = Params(type, op, bytes / world_size_ + DataTypeSize(type));
  const char* s = static_cast<const char*>(send);
  const char* d = static_cast<const char*>(recv);
  const bool overlap = s < d + bytes && d < s + bytes;
  return Submit(p, overlap ? ScratchBytes(p) : 0, type, op, "all-reduce", options,
                [&](const ScheduleParams& p) { return RingAllReduce(p, send, recv, count); });
}

std::unique_ptr<Work> TagSchedulePath::ReduceScatter(const void* send, void* recv,
                                                     size_t recv_count, DataType type, ReduceOp op,
                                                     const CollectiveOptions& options) {
  ScheduleParams p = Params(type, op, recv_count * DataTypeSize(type));
  return Submit(p, ScratchBytes(p), type, op, "reduce-scatter", options,
                [&](const ScheduleParams& p) { return RingReduceScatter(p, send, recv, recv_count); });
}

std::unique_ptr<Work> TagSchedulePath::AllGather(const void* send, void* recv, size_t send_count,
                                                 DataType type, const CollectiveOptions& options) {
  return Submit(Params(type, ReduceOp::kSum, send_count * DataTypeSize(type)), 0, type,
                ReduceOp::kSum, "all-gather", options,
                [&](const ScheduleParams& p) { return RingAllGather(p, send, recv, send_count); });
}

std::unique_ptr<Work> TagSchedulePath::Broadcast(void* buffer, size_t count, DataType type,
                                                 int root, const CollectiveOptions& options) {
  return Submit(Params(type, ReduceOp::kSum, count * DataTypeSize(type)), 0, type, ReduceOp::kSum,
                "broadcast", options,
                [&](const ScheduleParams& p) { return ChainBroadcast(p, buffer, count, root); });
}

std::unique_ptr<Work> TagSchedulePath::Barrier(const CollectiveOptions& options) {
  return Submit(Params(DataType::kI32, ReduceOp::kSum, 0), 0, DataType::kI32, ReduceOp::kSum,
                "barrier", options, [](const ScheduleParams& p) { return DisseminationBarrier(p); });
}

}  // namespace ucx_internal
}  // namespace athanor
