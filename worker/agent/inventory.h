// What a node has: GPUs (declared or counted), CPUs and memory from the OS.
// Pure reads of /proc and nvidia-smi; thread-safe; no errors (unknown = 0).
#pragma once

#include <cstdint>
#include <string>

namespace athanor::agent {

struct Inventory {
  int32_t gpus = 0;
  std::string gpu_model;  // "none" for declared slots without devices
  int64_t gpu_memory_mb = 0;  // per GPU; 0 when unknown
  int32_t cpus = 0;
  int64_t memory_mb = 0;
};

// `gpus` >= 0 declares that many slots; < 0 ("--gpus auto") counts CUDA
// devices via `nvidia-smi -L`, else /proc/driver/nvidia/gpus, else 0.
Inventory DetectInventory(int32_t gpus);

}  // namespace athanor::agent
