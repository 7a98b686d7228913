// One element of any DataType read or written as a double, and the exact
// result a reduction must produce: shared by the conformance suite
// (collectives/testing) and athanor-bench-allreduce's --check.
// Pure functions, thread-safe. Inputs are expected to be small integers, so
// every dtype holds them exactly and the sum does not depend on order.
#pragma once

#include <cstddef>
#include <functional>

#include "collectives/communicator.h"

namespace athanor {

// buf[i] = v, converted to `type` (f16/bf16 round to nearest even).
void StoreElement(DataType type, void* buf, size_t i, double v);
// buf[i] as a double.
double LoadElement(DataType type, const void* buf, size_t i);

// The value every rank must hold after reducing with `op` over `world` ranks,
// rank r contributing input(r). kAvg divides like the backends do: integer
// division for i32/i64, one f32 division rounded once to `type` for floats.
double ExactReduction(DataType type, ReduceOp op, int world,
                      const std::function<double(int rank)>& input);

}  // namespace athanor
