#include "checkpoint/tool/ckpt_tool.h"

#include <stdlib.h>

#include <sstream>

#include <gtest/gtest.h>

#include "checkpoint/checkpointer.h"
#include "checkpoint/file/file_object_store.h"
#include "checkpoint/layout.h"
#include "common/subprocess.h"

namespace athanor {
namespace {

struct ToolRun {
  int code;
  std::string out;
  std::string err;
};

ToolRun Tool(std::vector<std::string> args) {
  args.insert(args.begin(), "athanor-ckpt");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  int code = RunCkptTool(static_cast<int>(argv.size()), argv.data(), out, err);
  return {code, out.str(), err.str()};
}

std::string SaveTwoSteps() {
  std::string tmpl = ::testing::TempDir() + "/ckpt-tool-XXXXXX";
  std::string dir = mkdtemp(tmpl.data());
  auto store = FileObjectStore::Open(dir);
  EXPECT_TRUE(store.ok());
  InProcessCommitBarrier barrier(1);
  FakeClock clock(1'700'000'000);
  CheckpointerOptions o;
  o.job = "demo";
  o.clock = &clock;
  Checkpointer ckpt(store->get(), &barrier, o);
  std::vector<int32_t> data(256, 5);
  TrainingState state{{{"x", TensorDType::kI32, {256}, data.data(), 1024, {}}}, {}};
  for (int64_t step : {100, 200}) {
    EXPECT_TRUE(ckpt.Save(step, state).ok());
    EXPECT_TRUE(ckpt.Wait().ok());
  }
  return dir;
}

TEST(CkptTool, ListsCommittedStepsAsTableAndJson) {
  std::string dir = SaveTwoSteps();
  ToolRun table = Tool({"ls", "file://" + dir, "demo"});
  EXPECT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("STEP"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("2023-11-14 22:13:20"), std::string::npos) << table.out;
  ToolRun json = Tool({"ls", "file://" + dir, "demo", "--json"});
  EXPECT_EQ(json.code, 0) << json.err;
  auto size = FileObjectStore::Open(dir).value()->Head(ckpt_layout::ShardKey("demo", 100, 0, 1))->size;
  std::string s = std::to_string(size);
  EXPECT_EQ(json.out, "[{\"commit_unix\":1700000000,\"step\":100,\"total_bytes\":" + s +
                          ",\"world_size\":1},{\"commit_unix\":1700000000,\"step\":200,\"total_bytes\":" + s +
                          ",\"world_size\":1}]\n");
}

TEST(CkptTool, VerifyFindsACorruptShard) {
  std::string dir = SaveTwoSteps();
  EXPECT_EQ(Tool({"verify", dir, "demo", "200"}).out, "step 200: OK\n");
  std::string shard = dir + "/" + ckpt_layout::ShardKey("demo", 200, 0, 1);
  FILE* f = fopen(shard.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  fseek(f, -10, SEEK_END);
  fputc(0x7f, f);
  fclose(f);
  ToolRun bad = Tool({"verify", dir, "demo", "200"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.out.find("rank-00000-of-00001.safetensors: CRC32C mismatch"), std::string::npos) << bad.out;
  EXPECT_EQ(Tool({"verify", dir, "demo", "300"}).code, 1);
  EXPECT_EQ(Tool({"frobnicate", dir, "demo"}).code, 2);
  EXPECT_EQ(Tool({"ls"}).code, 2);
}

TEST(CkptTool, TheBinaryRuns) {
  const char* bin = getenv("ATHANOR_BIN_DIR");
  ASSERT_NE(bin, nullptr) << "ATHANOR_BIN_DIR not set (ctest sets it)";
  std::string dir = SaveTwoSteps();
  SubprocessOptions options;
  options.argv = {std::string(bin) + "/athanor-ckpt", "ls", dir, "demo", "--json"};
  options.capture_stdout = true;
  auto child = Subprocess::Start(options);
  ASSERT_TRUE(child.ok()) << child.status();
  std::string out = (*child)->ReadAllStdout();
  EXPECT_EQ((*child)->Wait().exit_code, 0);
  EXPECT_EQ(out.rfind("[{\"commit_unix\":1700000000,\"step\":100,", 0), 0u) << out;
}

}  // namespace
}  // namespace athanor
