#include "checkpoint/object_store_conformance.h"

#include <thread>
#include <vector>

namespace athanor {
namespace {

std::string Pattern(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    s[i] = static_cast<char>(x >> 24);
  }
  return s;
}

TEST_P(ObjectStoreConformance, PutThenGetReturnsTheSameBytes) {
  std::string data = Pattern(1000, 1);
  ASSERT_TRUE(store_->Put("a/b/obj.bin", data).ok());
  absl::StatusOr<std::string> got = store_->Get("a/b/obj.bin", 0, -1);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, data);
  absl::StatusOr<ObjectInfo> head = store_->Head("a/b/obj.bin");
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(head->key, "a/b/obj.bin");
  EXPECT_EQ(head->size, 1000u);
}

TEST_P(ObjectStoreConformance, EmptyObjectRoundTrips) {
  ASSERT_TRUE(store_->Put("empty", "").ok());
  absl::StatusOr<std::string> got = store_->Get("empty", 0, -1);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "");
  EXPECT_EQ(store_->Head("empty")->size, 0u);
}

TEST_P(ObjectStoreConformance, RangedGetReturnsExactlyTheRange) {
  std::string data = Pattern(4096, 2);
  ASSERT_TRUE(store_->Put("ranged", data).ok());
  EXPECT_EQ(*store_->Get("ranged", 100, 17), data.substr(100, 17));
  EXPECT_EQ(*store_->Get("ranged", 4000, -1), data.substr(4000));
  EXPECT_EQ(*store_->Get("ranged", 4095, 1), data.substr(4095, 1));
  EXPECT_EQ(store_->Get("ranged", 4000, 200).status().code(), absl::StatusCode::kOutOfRange);
}

TEST_P(ObjectStoreConformance, MissingObjectsAreNotFound) {
  EXPECT_EQ(store_->Get("nope/x", 0, -1).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Head("nope/x").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(store_->Delete("nope/x").ok());
}

TEST_P(ObjectStoreConformance, StreamingPutOfManyAppendsIsOneObject) {
  std::string data = Pattern(3 * 1024 * 1024 + 123, 3);
  absl::StatusOr<std::unique_ptr<WritableObject>> out = store_->OpenWrite("big/obj", PutMode::kOverwrite);
  ASSERT_TRUE(out.ok()) << out.status();
  size_t step = 300 * 1024 + 7;
  for (size_t pos = 0; pos < data.size(); pos += step) {
    ASSERT_TRUE((*out)->Append(absl::string_view(data).substr(pos, step)).ok());
  }
  EXPECT_EQ(store_->Head("big/obj").status().code(), absl::StatusCode::kNotFound)
      << "visible before Close";
  absl::Status closed = (*out)->Close();
  ASSERT_TRUE(closed.ok()) << closed;
  absl::StatusOr<std::string> got = store_->Get("big/obj", 0, -1);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->size(), data.size());
  EXPECT_TRUE(*got == data);
}

TEST_P(ObjectStoreConformance, AbortedPutLeavesNothingVisible) {
  auto out = store_->OpenWrite("aborted", PutMode::kOverwrite);
  ASSERT_TRUE(out.ok());
  ASSERT_TRUE((*out)->Append(Pattern(10, 4)).ok());
  (*out)->Abort();
  out->reset();
  EXPECT_EQ(store_->Head("aborted").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->List("")->size(), 0u);
}

TEST_P(ObjectStoreConformance, OverwriteReplacesTheObject) {
  ASSERT_TRUE(store_->Put("k", "first").ok());
  ASSERT_TRUE(store_->Put("k", "second!").ok());
  EXPECT_EQ(*store_->Get("k", 0, -1), "second!");
}

TEST_P(ObjectStoreConformance, CreateOnlyRefusesAnExistingKey) {
  ASSERT_TRUE(store_->Put("once", "winner", PutMode::kCreateOnly).ok());
  absl::Status again = store_->Put("once", "loser", PutMode::kCreateOnly);
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists) << again;
  EXPECT_EQ(*store_->Get("once", 0, -1), "winner");
}

TEST_P(ObjectStoreConformance, ListReturnsKeysUnderThePrefixSorted) {
  for (const char* key : {"j/step-2/b", "j/step-1/a", "j/step-10/c", "jx/other", "k/z"}) {
    ASSERT_TRUE(store_->Put(key, key).ok());
  }
  absl::StatusOr<std::vector<ObjectInfo>> listed = store_->List("j/");
  ASSERT_TRUE(listed.ok()) << listed.status();
  std::vector<std::string> keys;
  for (const ObjectInfo& info : *listed) keys.push_back(info.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"j/step-1/a", "j/step-10/c", "j/step-2/b"}));
  EXPECT_EQ((*listed)[0].size, 10u);
  EXPECT_EQ(store_->List("j/step-1")->size(), 2u);
  EXPECT_EQ(store_->List("")->size(), 5u);
  EXPECT_EQ(store_->List("nothing/")->size(), 0u);
}

TEST_P(ObjectStoreConformance, DeleteRemovesTheObject) {
  ASSERT_TRUE(store_->Put("d/x", "1").ok());
  ASSERT_TRUE(store_->Put("d/y", "2").ok());
  ASSERT_TRUE(store_->Delete("d/x").ok());
  EXPECT_EQ(store_->Head("d/x").status().code(), absl::StatusCode::kNotFound);
  ASSERT_EQ(store_->List("d/")->size(), 1u);
  EXPECT_EQ(store_->List("d/")->front().key, "d/y");
}

TEST_P(ObjectStoreConformance, InvalidKeysAreRejected) {
  EXPECT_EQ(store_->Put("/abs", "x").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Put("a/../b", "x").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Put("", "x").code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(ObjectStoreConformance, ConcurrentPutsAllLand) {
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  std::vector<absl::Status> results(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5 && results[t].ok(); ++i) {
        results[t] = store_->Put("c/" + std::to_string(t) + "-" + std::to_string(i), Pattern(5000, t * 10 + i));
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(store_->List("c/")->size(), 20u);
  EXPECT_EQ(*store_->Get("c/3-4", 0, -1), Pattern(5000, 34));
}

}  // namespace
}  // namespace athanor
