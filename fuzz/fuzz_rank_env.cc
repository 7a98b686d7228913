// Fuzzes rank env parsing: the input is lines NAME=VALUE forming the
// environment; an accepted environment must satisfy rank < world size, and
// the contract it prints must parse back to the same ranks.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "absl/strings/str_split.h"
#include "common/rank_env.h"

namespace {

athanor::EnvLookup Lookup(const std::map<std::string, std::string>* env) {
  return [env](const std::string& name) -> std::optional<std::string> {
    auto it = env->find(name);
    if (it == env->end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::map<std::string, std::string> env;
  for (absl::string_view line : absl::StrSplit(absl::string_view(reinterpret_cast<const char*>(data), size), '\n')) {
    size_t eq = line.find('=');
    if (eq == absl::string_view::npos) continue;
    env[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
  }
  auto parsed = athanor::ParseRankEnv(Lookup(&env));
  if (!parsed.ok()) return 0;
  if (parsed->rank < 0 || parsed->world_size < 1 || parsed->rank >= parsed->world_size) __builtin_trap();
  std::map<std::string, std::string> contract = parsed->ToEnvironment();
  auto again = athanor::ParseRankEnv(Lookup(&contract));
  if (!again.ok() || again->rank != parsed->rank || again->world_size != parsed->world_size ||
      again->master_addr != parsed->master_addr) {
    __builtin_trap();
  }
  return 0;
}
