// Writes the structured seeds of the fuzz corpora: a real two-rank
// checkpoint (COMMIT, manifests, safetensors shards) for fuzz_restore,
// fuzz_manifest and fuzz_safetensors, TCP store frames for fuzz_store_frame
// and stored records for fuzz_record_codec (the old format's seeds,
// legacy_job and legacy_node, are kept as written by the release before it).
//   fuzz_make_seeds <corpus dir>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/checkpointer.h"
#include "checkpoint/commit_barrier.h"
#include "checkpoint/fake_object_store.h"
#include "checkpoint/layout.h"
#include "coordinator/store/record_codec.h"
#include "fuzz/store_frame_seeds.h"

namespace {

void Write(const std::string& dir, const std::string& target, const std::string& name,
           const std::string& bytes) {
  std::ofstream out(dir + "/" + target + "/" + name, std::ios::binary);
  out << bytes;
  if (!out) std::cerr << "cannot write " << dir << "/" << target << "/" << name << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: fuzz_make_seeds <corpus dir>\n";
    return 2;
  }
  const std::string dir = argv[1];
  athanor::FakeObjectStore store;
  athanor::InProcessCommitBarrier barrier(2);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.emplace_back([&, rank] {
      std::vector<float> w(20), opt(12);
      for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i);
      for (size_t i = 0; i < opt.size(); ++i) opt[i] = static_cast<float>(100 * rank + i);
      athanor::TrainingState state;
      state.tensors = {{"w", athanor::TensorDType::kF32, {5, 4}, w.data(), w.size() * 4, {}},
                       {"opt", athanor::TensorDType::kF32, {3, 4}, opt.data(), opt.size() * 4,
                        athanor::ShardSpec{rank * 3, 6}}};
      state.metadata = {{"rng_state", "r"}, {"data_cursor", "10"}};
      athanor::CheckpointerOptions o;
      o.job = "j";
      o.rank = rank;
      o.world_size = 2;
      athanor::Checkpointer ckpt(&store, &barrier, o);
      if (!ckpt.Save(1, state).ok() || !ckpt.Wait().ok()) std::cerr << "save failed\n";
    });
  }
  for (auto& t : ranks) t.join();
  namespace layout = athanor::ckpt_layout;
  auto objects = store.Objects();
  const std::string commit = objects[layout::CommitKey("j", 1)];
  const std::string m0 = objects[layout::ManifestKey("j", 1, 0)], m1 = objects[layout::ManifestKey("j", 1, 1)];
  const std::string s0 = objects[layout::ShardKey("j", 1, 0, 2)], s1 = objects[layout::ShardKey("j", 1, 1, 2)];
  const std::string sep = "\n--\n";
  Write(dir, "fuzz_restore", "two_ranks", commit + sep + m0 + sep + s0 + sep + m1 + sep + s1);
  Write(dir, "fuzz_manifest", "commit", commit);
  Write(dir, "fuzz_manifest", "manifest_rank0", m0);
  Write(dir, "fuzz_manifest", "manifest_rank1", m1);
  Write(dir, "fuzz_safetensors", "shard_rank0", s0);
  Write(dir, "fuzz_safetensors", "shard_rank1", s1);

  for (const auto& [name, bytes] : athanor::fuzz::StoreFrameSeeds()) Write(dir, "fuzz_store_frame", name, bytes);

  athanor::coord::JobRecord job;
  job.id = "7";
  job.seq = 7;
  job.spec.name = "train";
  job.spec.nodes = 2;
  job.spec.command = {"athanor-train", "--steps", "10"};
  job.spec.env = {{"A", "1"}};
  job.spec.time_limit_s = 3600;
  job.allocation = {{0, "n1", 0, 0, {0}}, {1, "n2", 0, 1, {0}}};
  job.usage = {{1.5, 2.5, 2}};
  job.attempt_nodes = {{"n1", "n2"}};
  Write(dir, "fuzz_record_codec", "job", athanor::coord::EncodeJob(job));
  athanor::coord::NodeRecord node;
  node.name = "n1";
  node.host = "10.0.0.1";
  node.inventory.gpus = 8;
  node.inventory.labels = {{"rack", "a"}};
  Write(dir, "fuzz_record_codec", "node", athanor::coord::EncodeNode(node));
  return 0;
}
