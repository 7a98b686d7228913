#include "checkpoint/file/file_object_store.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "checkpoint/object_store_conformance.h"

namespace athanor {
namespace {

std::string MakeTempDir() {
  std::string tmpl = (getenv("TMPDIR") ? std::string(getenv("TMPDIR")) : "/tmp") + "/athanor-file-XXXXXX";
  char* dir = mkdtemp(tmpl.data());
  return dir ? std::string(dir) : std::string();
}

std::unique_ptr<ObjectStore> MakeFileStore() {
  auto store = FileObjectStore::Open(MakeTempDir() + "/root");
  if (!store.ok()) return nullptr;
  return std::move(*store);
}

INSTANTIATE_TEST_SUITE_P(File, ObjectStoreConformance,
                         testing::Values(StoreFactory{"file", MakeFileStore}), StoreFactoryName);

TEST(FileObjectStore, OpensThroughTheRegistryByScheme) {
  RegisterFileObjectStore();
  std::string dir = MakeTempDir();
  auto store = OpenObjectStore("file://" + dir + "/x");
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->Describe(), "file://" + dir + "/x");
  ASSERT_TRUE((*store)->Put("a/b", "hello").ok());
  EXPECT_EQ(access((dir + "/x/a/b").c_str(), R_OK), 0);
  auto bare = OpenObjectStore(dir + "/y");
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_EQ((*bare)->Describe(), "file://" + dir + "/y");
}

TEST(FileObjectStore, UnfinishedWritesArePendingUploadsUntilAborted) {
  std::string dir = MakeTempDir();
  auto store = FileObjectStore::Open(dir);
  ASSERT_TRUE(store.ok());
  auto out = (*store)->OpenWrite("job/step-0000000001/shard", PutMode::kOverwrite);
  ASSERT_TRUE(out.ok());
  ASSERT_TRUE((*out)->Append("partial").ok());
  // A crashed writer: the temporary stays, the object is invisible.
  auto pending = (*store)->ListPendingUploads("job/");
  ASSERT_TRUE(pending.ok());
  ASSERT_EQ(pending->size(), 1u);
  EXPECT_EQ(pending->front().key.rfind("job/step-0000000001/.shard.athanor-tmp-", 0), 0u) << pending->front().key;
  EXPECT_EQ((*store)->List("job/")->size(), 0u);
  ASSERT_TRUE((*store)->AbortPendingUpload(pending->front()).ok());
  EXPECT_EQ((*store)->ListPendingUploads("job/")->size(), 0u);
  (*out)->Abort();
}

TEST(FileObjectStore, DeletingTheLastObjectRemovesEmptyDirectories) {
  std::string dir = MakeTempDir();
  auto store = FileObjectStore::Open(dir);
  ASSERT_TRUE((*store)->Put("j/step-1/a", "x").ok());
  ASSERT_TRUE((*store)->Delete("j/step-1/a").ok());
  EXPECT_NE(access((dir + "/j").c_str(), F_OK), 0);
  EXPECT_EQ(access(dir.c_str(), F_OK), 0);
}

TEST(FileObjectStore, RelativeRootIsRejected) {
  EXPECT_EQ(FileObjectStore::Open("relative/dir").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace athanor
