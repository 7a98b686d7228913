#include "common/rank_env.h"

#include <charconv>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace athanor {
namespace {

absl::Status ReadInt(const EnvLookup& lookup, const std::string& name, int* out, bool* present) {
  std::optional<std::string> v = lookup(name);
  if (present) *present = v.has_value();
  if (!v) return absl::OkStatus();
  int value = 0;
  auto [ptr, ec] = std::from_chars(v->data(), v->data() + v->size(), value);
  if (ec != std::errc() || ptr != v->data() + v->size() || value < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("environment variable ", name, "='", *v, "' is not a non-negative integer"));
  }
  *out = value;
  return absl::OkStatus();
}

std::string ReadString(const EnvLookup& lookup, const std::string& name) {
  return lookup(name).value_or("");
}

}  // namespace

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

std::map<std::string, std::string> RankEnv::ToEnvironment() const {
  std::map<std::string, std::string> env = {
      {"RANK", std::to_string(rank)},
      {"WORLD_SIZE", std::to_string(world_size)},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(local_world_size)},
      {"NODE_RANK", std::to_string(node_rank)},
      {"MASTER_ADDR", master_addr},
      {"MASTER_PORT", std::to_string(master_port)},
      {"ATHANOR_JOB_ID", job_id},
      {"ATHANOR_ATTEMPT", std::to_string(attempt)},
      {"ATHANOR_CHECKPOINT_URI", checkpoint_uri},
      {"ATHANOR_COORDINATOR", coordinator},
  };
  env["CUDA_VISIBLE_DEVICES"] = cuda_visible_devices;
  // What torchrun's elastic agent adds, for programs that read it (the node's
  // place as GROUP_RANK, the worker group's restarts so far).
  env["GROUP_RANK"] = std::to_string(node_rank);
  if (local_world_size > 0 && world_size % local_world_size == 0) {
    env["GROUP_WORLD_SIZE"] = std::to_string(world_size / local_world_size);
  }
  env["ROLE_NAME"] = "default";
  env["ROLE_RANK"] = std::to_string(rank);
  env["ROLE_WORLD_SIZE"] = std::to_string(world_size);
  env["TORCHELASTIC_RUN_ID"] = job_id.empty() ? "none" : job_id;
  env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(attempt > 0 ? attempt - 1 : 0);
  return env;
}

absl::StatusOr<RankEnv> ParseRankEnv(const EnvLookup& lookup) {
  RankEnv env;
  bool has_rank = false, has_world = false;
  absl::Status s = ReadInt(lookup, "RANK", &env.rank, &has_rank);
  if (!s.ok()) return s;
  if (has_rank) {
    env.source = RankEnvSource::kContract;
    for (auto [name, field] : {std::pair{"WORLD_SIZE", &env.world_size},
                               std::pair{"LOCAL_RANK", &env.local_rank},
                               std::pair{"LOCAL_WORLD_SIZE", &env.local_world_size},
                               std::pair{"NODE_RANK", &env.node_rank},
                               std::pair{"MASTER_PORT", &env.master_port},
                               std::pair{"ATHANOR_ATTEMPT", &env.attempt}}) {
      bool present = false;
      s = ReadInt(lookup, name, field, &present);
      if (!s.ok()) return s;
      if (std::string(name) == "WORLD_SIZE") has_world = present;
    }
    if (!has_world) return absl::InvalidArgumentError("RANK is set but WORLD_SIZE is not");
  } else if (lookup("OMPI_COMM_WORLD_RANK")) {
    env.source = RankEnvSource::kOpenMpi;
    for (auto [name, field] : {std::pair{"OMPI_COMM_WORLD_RANK", &env.rank},
                               std::pair{"OMPI_COMM_WORLD_SIZE", &env.world_size},
                               std::pair{"OMPI_COMM_WORLD_LOCAL_RANK", &env.local_rank},
                               std::pair{"OMPI_COMM_WORLD_LOCAL_SIZE", &env.local_world_size},
                               std::pair{"OMPI_COMM_WORLD_NODE_RANK", &env.node_rank}}) {
      s = ReadInt(lookup, name, field, nullptr);
      if (!s.ok()) return s;
    }
  } else if (lookup("PMIX_RANK")) {
    env.source = RankEnvSource::kPmix;
    s = ReadInt(lookup, "PMIX_RANK", &env.rank, nullptr);
    if (!s.ok()) return s;
    s = ReadInt(lookup, "PMIX_SIZE", &env.world_size, nullptr);
    if (!s.ok()) return s;
  } else if (lookup("SLURM_PROCID")) {
    env.source = RankEnvSource::kSlurm;
    for (auto [name, field] : {std::pair{"SLURM_PROCID", &env.rank},
                               std::pair{"SLURM_NTASKS", &env.world_size},
                               std::pair{"SLURM_LOCALID", &env.local_rank},
                               std::pair{"SLURM_NODEID", &env.node_rank}}) {
      s = ReadInt(lookup, name, field, nullptr);
      if (!s.ok()) return s;
    }
  }
  if (env.world_size < 1) return absl::InvalidArgumentError("world size must be at least 1");
  if (env.rank >= env.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", env.rank, " is not below world size ", env.world_size));
  }
  if (env.source != RankEnvSource::kContract) {
    // Not given by a launcher that speaks the contract: fill in MASTER_* if set.
    ReadInt(lookup, "MASTER_PORT", &env.master_port, nullptr).IgnoreError();
  }
  env.master_addr = ReadString(lookup, "MASTER_ADDR");
  env.cuda_visible_devices = ReadString(lookup, "CUDA_VISIBLE_DEVICES");
  env.job_id = ReadString(lookup, "ATHANOR_JOB_ID");
  env.checkpoint_uri = ReadString(lookup, "ATHANOR_CHECKPOINT_URI");
  env.coordinator = ReadString(lookup, "ATHANOR_COORDINATOR");
  return env;
}

absl::StatusOr<RendezvousEnv> ParseRendezvousEnv(const EnvLookup& lookup) {
  RendezvousEnv env;
  env.secret = ReadString(lookup, "ATHANOR_RENDEZVOUS_SECRET");
  if (lookup("ATHANOR_RENDEZVOUS_SECRET").has_value() && env.secret.size() < 16) {
    return absl::InvalidArgumentError(absl::StrCat(
        "environment variable ATHANOR_RENDEZVOUS_SECRET holds ", env.secret.size(),
        " characters; a rendezvous secret has at least 16"));
  }
  bool has_fd = false;
  RETURN_IF_ERROR(ReadInt(lookup, "ATHANOR_RENDEZVOUS_LISTEN_FD", &env.listen_fd, &has_fd));
  if (has_fd && env.listen_fd < 3) {
    return absl::InvalidArgumentError(absl::StrCat("environment variable ATHANOR_RENDEZVOUS_LISTEN_FD=",
                                                   env.listen_fd, " is not an inherited descriptor (>= 3)"));
  }
  if (!has_fd) env.listen_fd = -1;
  return env;
}

}  // namespace athanor
