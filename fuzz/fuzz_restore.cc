// Fuzzes restore planning: the input holds a COMMIT, one or two manifests
// and their shards (sections split by a line "\n--\n"), stored in a fake
// store as step 1 of job "j"; Restore then loads it into fixed targets (a
// replicated [5,4] f32 and a sharded [3,4] f32 of 6 rows) for rank 0 and 1 of
// 2. Whatever the bytes say, no copy may leave its target (ASan checks).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "checkpoint/fake_object_store.h"
#include "checkpoint/layout.h"
#include "checkpoint/restore.h"
#include "common/logging.h"

namespace {

void RestoreAs(athanor::ObjectStore* store, int rank) {
  std::vector<float> w(20), opt(12);
  std::vector<athanor::TensorRef> targets = {
      {"w", athanor::TensorDType::kF32, {5, 4}, w.data(), w.size() * 4, {}},
      {"opt", athanor::TensorDType::kF32, {3, 4}, opt.data(), opt.size() * 4,
       athanor::ShardSpec{rank * 3, 6}}};
  athanor::RestoreOptions options{"j", rank, 2, nullptr, /*verify_all_shards=*/rank == 1};
  (void)athanor::Restore(store, options, targets);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bool quiet = [] {
    athanor::SetMinLogLevel(athanor::LogLevel::kError);
    return true;
  }();
  (void)quiet;
  std::vector<std::string> parts =
      absl::StrSplit(absl::string_view(reinterpret_cast<const char*>(data), size), "\n--\n");
  athanor::FakeObjectStore store;
  namespace layout = athanor::ckpt_layout;
  const std::vector<std::string> keys = {layout::CommitKey("j", 1),       layout::ManifestKey("j", 1, 0),
                                         layout::ShardKey("j", 1, 0, 2),  layout::ManifestKey("j", 1, 1),
                                         layout::ShardKey("j", 1, 1, 2)};
  for (size_t i = 0; i < parts.size() && i < keys.size(); ++i) {
    (void)store.Put(keys[i], parts[i], athanor::PutMode::kOverwrite);
  }
  RestoreAs(&store, 0);
  RestoreAs(&store, 1);
  return 0;
}
