#include "collectives/testing/conformance.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "collectives/reduce/element_values.h"
#include "common/status.h"

namespace athanor {
namespace {

const DataType kTypes[] = {DataType::kF32, DataType::kF16, DataType::kBF16, DataType::kI32,
                           DataType::kI64};
const ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin};

// What every backend must produce at element i.
double Expected(DataType t, ReduceOp op, int n, size_t i) {
  return ExactReduction(t, op, n, [i](int r) { return ConformanceInput(r, i); });
}

std::string Describe(const char* what, DataType t, ReduceOp op, size_t count, bool in_place) {
  return absl::StrCat(what, " ", DataTypeName(t), " ", ReduceOpName(op), " count=", count,
                      in_place ? " in-place" : " out-of-place");
}

absl::Status Compare(const std::string& what, DataType t, const void* got, size_t count,
                     const std::function<double(size_t)>& want) {
  for (size_t i = 0; i < count; ++i) {
    double g = LoadElement(t, got, i), w = want(i);
    if (g != w) {
      return absl::InternalError(absl::StrCat(what, ": element ", i, " is ", g, ", want ", w));
    }
  }
  return absl::OkStatus();
}

absl::Status AllReduceCase(Communicator* comm, DataType t, ReduceOp op, size_t count,
                           bool in_place) {
  const int n = comm->world_size(), r = comm->rank();
  const size_t esz = DataTypeSize(t);
  std::vector<char> send(count * esz + 8), recv(count * esz + 8, 0x5a);
  for (size_t i = 0; i < count; ++i) StoreElement(t, send.data(), i, ConformanceInput(r, i));
  void* out = in_place ? send.data() : recv.data();
  std::string what = Describe("all-reduce", t, op, count, in_place);
  RETURN_IF_ERROR(Annotate(comm->AllReduce(send.data(), out, count, t, op), what));
  return Compare(what, t, out, count, [&](size_t i) { return Expected(t, op, n, i); });
}

absl::Status ReduceScatterCase(Communicator* comm, DataType t, ReduceOp op, size_t count,
                               bool in_place) {
  const int n = comm->world_size(), r = comm->rank();
  const size_t esz = DataTypeSize(t);
  std::vector<char> send(count * n * esz + 8), recv(count * esz + 8, 0x5a);
  for (size_t i = 0; i < count * n; ++i) StoreElement(t, send.data(), i, ConformanceInput(r, i));
  void* out = in_place ? send.data() + r * count * esz : recv.data();
  std::string what = Describe("reduce-scatter", t, op, count, in_place);
  RETURN_IF_ERROR(Annotate(comm->ReduceScatter(send.data(), out, count, t, op), what));
  return Compare(what, t, out, count, [&](size_t i) { return Expected(t, op, n, r * count + i); });
}

absl::Status AllGatherCase(Communicator* comm, DataType t, size_t count, bool in_place) {
  const int n = comm->world_size(), r = comm->rank();
  const size_t esz = DataTypeSize(t);
  std::vector<char> send(count * esz + 8), recv(count * n * esz + 8, 0x5a);
  for (size_t i = 0; i < count; ++i) StoreElement(t, send.data(), i, ConformanceInput(r, i));
  const void* in = send.data();
  if (in_place) {
    std::memcpy(recv.data() + r * count * esz, send.data(), count * esz);
    in = recv.data() + r * count * esz;
  }
  std::string what = Describe("all-gather", t, ReduceOp::kSum, count, in_place);
  RETURN_IF_ERROR(Annotate(comm->AllGather(in, recv.data(), count, t), what));
  return Compare(what, t, recv.data(), count * n,
                 [&](size_t i) { return ConformanceInput(static_cast<int>(i / count), i % count); });
}

absl::Status BroadcastCase(Communicator* comm, DataType t, size_t count, int root) {
  const int r = comm->rank();
  const size_t esz = DataTypeSize(t);
  std::vector<char> buf(count * esz + 8, 0x5a);
  if (r == root) {
    for (size_t i = 0; i < count; ++i) StoreElement(t, buf.data(), i, ConformanceInput(root, i));
  }
  std::string what = absl::StrCat("broadcast ", DataTypeName(t), " count=", count, " root=", root);
  RETURN_IF_ERROR(Annotate(comm->Broadcast(buf.data(), count, t, root), what));
  return Compare(what, t, buf.data(), count, [&](size_t i) { return ConformanceInput(root, i); });
}

}  // namespace

double ConformanceInput(int rank, size_t i) {
  return static_cast<double>(static_cast<int64_t>((rank * 3 + i * 7) % 11) - 5);
}

absl::Status RunConformance(Communicator* comm, const ConformanceOptions& options) {
  for (size_t count : options.counts) {
    for (DataType t : kTypes) {
      for (bool in_place : {false, true}) {
        for (ReduceOp op : kOps) {
          RETURN_IF_ERROR(AllReduceCase(comm, t, op, count, in_place));
          RETURN_IF_ERROR(ReduceScatterCase(comm, t, op, count, in_place));
        }
        RETURN_IF_ERROR(AllGatherCase(comm, t, count, in_place));
      }
      RETURN_IF_ERROR(BroadcastCase(comm, t, count, 0));
      RETURN_IF_ERROR(BroadcastCase(comm, t, count, comm->world_size() - 1));
    }
    RETURN_IF_ERROR(Annotate(comm->Barrier(), "barrier"));
  }
  for (size_t count : options.big_counts) {
    RETURN_IF_ERROR(AllReduceCase(comm, DataType::kF32, ReduceOp::kSum, count, true));
    RETURN_IF_ERROR(AllReduceCase(comm, DataType::kBF16, ReduceOp::kAvg, count, false));
    RETURN_IF_ERROR(ReduceScatterCase(comm, DataType::kF32, ReduceOp::kSum, count / comm->world_size(), false));
    RETURN_IF_ERROR(AllGatherCase(comm, DataType::kF16, count / comm->world_size(), false));
    RETURN_IF_ERROR(BroadcastCase(comm, DataType::kI32, count, 0));
  }
  return absl::OkStatus();
}

absl::Status RunAllReduceConformance(Communicator* comm, const ConformanceOptions& options) {
  for (size_t count : options.counts) {
    for (DataType t : kTypes) {
      for (bool in_place : {false, true}) {
        for (ReduceOp op : kOps) RETURN_IF_ERROR(AllReduceCase(comm, t, op, count, in_place));
      }
    }
  }
  for (size_t count : options.big_counts) {
    RETURN_IF_ERROR(AllReduceCase(comm, DataType::kF32, ReduceOp::kSum, count, true));
    RETURN_IF_ERROR(AllReduceCase(comm, DataType::kBF16, ReduceOp::kAvg, count, false));
  }
  return absl::OkStatus();
}

absl::Status RunConcurrentTags(Communicator* comm) {
  const int n = comm->world_size(), r = comm->rank();
  // Small and large counts: backends may take different paths by size.
  constexpr int kOps = 6;
  const size_t counts[kOps] = {3, 5000, 300000, 17, 70001, 40000};
  std::vector<std::vector<int32_t>> bufs(kOps);
  std::vector<std::unique_ptr<Work>> works(kOps);
  for (int k = 0; k < kOps; ++k) {
    bufs[k].resize(counts[k]);
    for (size_t i = 0; i < counts[k]; ++i) bufs[k][i] = static_cast<int32_t>(ConformanceInput(r, i) + k * 100);
  }
  for (int j = 0; j < kOps; ++j) {
    int k = (r % 2 == 0) ? j : kOps - 1 - j;  // odd ranks issue in reverse order
    CollectiveOptions o;
    o.tag = 1000 + k;
    works[k] = comm->AllReduceAsync(bufs[k].data(), bufs[k].data(), counts[k], DataType::kI32,
                                    ReduceOp::kSum, o);
  }
  for (int k = kOps - 1; k >= 0; --k) {
    RETURN_IF_ERROR(Annotate(works[k]->Wait(std::chrono::minutes(1)), absl::StrCat("tag ", 1000 + k)));
    RETURN_IF_ERROR(Compare(absl::StrCat("concurrent all-reduce tag ", 1000 + k), DataType::kI32,
                            bufs[k].data(), counts[k], [&](size_t i) {
                              return Expected(DataType::kI32, ReduceOp::kSum, n, i) + k * 100 * n;
                            }));
  }
  return absl::OkStatus();
}

}  // namespace athanor
