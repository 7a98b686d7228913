#include <gtest/gtest.h>

#include "checkpoint/fake_object_store.h"
#include "checkpoint/fault_injecting_store.h"
#include "checkpoint/object_store_conformance.h"

namespace athanor {
namespace {

INSTANTIATE_TEST_SUITE_P(
    Fake, ObjectStoreConformance,
    testing::Values(StoreFactory{"fake", [] { return std::unique_ptr<ObjectStore>(new FakeObjectStore()); }},
                    // The decorator must be transparent when no fault is armed.
                    StoreFactory{"faulty_fake_without_faults",
                                 [] {
                                   return std::unique_ptr<ObjectStore>(new FaultInjectingStore(
                                       std::unique_ptr<ObjectStore>(new FakeObjectStore())));
                                 }}),
    StoreFactoryName);

TEST(ObjectStoreRegistry, UnknownSchemeIsUnimplemented) {
  auto store = OpenObjectStore("gopher://x/y");
  EXPECT_EQ(store.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(store.status().message().find("gopher"), absl::string_view::npos);
}

TEST(ObjectStoreRegistry, RegisteredFactoryIsUsed) {
  RegisterObjectStoreScheme("mem", [](const std::string&) -> absl::StatusOr<std::unique_ptr<ObjectStore>> {
    return std::unique_ptr<ObjectStore>(new FakeObjectStore());
  });
  auto store = OpenObjectStore("mem://anything");
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->Describe(), "fake://");
}

TEST(FaultInjectingStore, FailsTheNthMatchingPutOnly) {
  FakeObjectStore fake;
  FaultInjectingStore faulty(&fake);
  faulty.FailNthPut(2, "shard");
  EXPECT_TRUE(faulty.Put("a/shard-1", "x").ok());
  EXPECT_TRUE(faulty.Put("a/other", "x").ok());
  absl::Status second = faulty.Put("a/shard-2", "x");
  EXPECT_EQ(second.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(faulty.Put("a/shard-3", "x").ok());
  EXPECT_EQ(faulty.puts_failed(), 1);
  EXPECT_EQ(fake.Objects().size(), 3u);
  EXPECT_EQ(fake.Objects().count("a/shard-2"), 0u);
}

TEST(FaultInjectingStore, CorruptsMatchingObjectsByOneByte) {
  FakeObjectStore fake;
  FaultInjectingStore faulty(&fake);
  faulty.CorruptPuts(".bin");
  ASSERT_TRUE(faulty.Put("x.bin", "abcd").ok());
  ASSERT_TRUE(faulty.Put("x.txt", "abcd").ok());
  EXPECT_EQ(fake.Objects().at("x.bin"), std::string("ab") + static_cast<char>('c' ^ 1) + "d");
  EXPECT_EQ(fake.Objects().at("x.txt"), "abcd");
}

}  // namespace
}  // namespace athanor
