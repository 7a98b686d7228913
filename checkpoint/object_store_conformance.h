// The ObjectStore conformance suite: one parameterised gtest that every
// backend runs. A backend joins in a few lines:
//
//   INSTANTIATE_TEST_SUITE_P(File, ObjectStoreConformance,
//       testing::Values(StoreFactory{"file", [] { return MakeFileStore(); }}),
//       StoreFactoryName);
//
// and links athanor_checkpoint_conformance (checkpoint/CMakeLists.txt). The
// factory returns a fresh, empty store (or an empty prefix of a shared one)
// for every test.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "checkpoint/object_store.h"

namespace athanor {

struct StoreFactory {
  std::string name;
  std::function<std::unique_ptr<ObjectStore>()> make;
};

inline std::string StoreFactoryName(const testing::TestParamInfo<StoreFactory>& info) {
  return info.param.name;
}

class ObjectStoreConformance : public testing::TestWithParam<StoreFactory> {
 protected:
  void SetUp() override {
    store_ = GetParam().make();
    // A factory returns null when its backend cannot run here (no server).
    if (store_ == nullptr) GTEST_SKIP() << GetParam().name << " backend unavailable";
  }
  std::unique_ptr<ObjectStore> store_;
};

}  // namespace athanor
