// `athanor alloc`: an interactive allocation, i.e. a gang job that runs CMD
// (default: a placeholder sleeping until killed) and is reclaimed by the
// coordinator after --idle-timeout without use.
#include <iostream>

#include "absl/strings/str_cat.h"
#include "launcher/cli_commands.h"
#include "launcher/cli_format.h"
#include "launcher/cli_util.h"

namespace athanor::cli {

int RunAlloc(CliContext& ctx, const std::vector<std::string>& args) {
  int32_t nodes = 1, gpus_per_node = 1;
  std::string idle_timeout, name, tenant, archive_uri, image;
  std::vector<std::string> volumes;
  bool json = false;
  po::options_description desc("athanor alloc options");
  desc.add_options()
      ("nodes", po::value(&nodes), "nodes in the gang (default 1)")
      ("gpus-per-node", po::value(&gpus_per_node), "GPUs per node (default 1)")
      ("idle-timeout", po::value(&idle_timeout)->required(),
       "reclaim after this long without use (30s, 10m, 1h)")
      ("name", po::value(&name), "allocation name")
      ("tenant", po::value(&tenant), "tenant billed (default: $USER)")
      ("archive-uri", po::value(&archive_uri),
       "object store that keeps the work dirs when reclaimed (default: the agent's --archive-uri)")
      ("image", po::value(&image),
       "run in this image (`athanor image ls`) instead of the node's root filesystem")
      ("volume", po::value(&volumes)->composing(),
       "NAME:/path[:ro] mounts the tenant's volume at /path (repeatable; read-write needs --nodes 1)")
      ("json", po::bool_switch(&json), "print {\"job_id\": ...}");
  ParsedCommandLine cmd;
  if (int rc = ParseFlags(args, desc,
                          "usage: athanor alloc --nodes N --gpus-per-node G --idle-timeout DURATION "
                          "[-- CMD [ARGS...]]\n"
                          "Holds a gang for interactive work; prints its job id. CMD (e.g. a "
                          "notebook server)\nruns once per GPU in its own work dir; without CMD a "
                          "placeholder sleeps until\nreclaimed. Use is measured (GPU utilisation, "
                          "else CPU time); idle past the timeout,\nthe allocation is warned, then "
                          "reclaimed (CANCELLED) and its work dirs archived as\n"
                          "<job>/workdir/rank-<r>.tar. `athanor cancel ID` releases it.",
                          &cmd);
      rc >= 0) {
    return rc;
  }
  std::optional<int64_t> timeout = ParseDurationSeconds(idle_timeout);
  if (!timeout || *timeout <= 0) {
    std::cerr << "athanor alloc: --idle-timeout expects a positive duration like 30s, 10m or 1h\n";
    return kExitUsage;
  }
  rpc::SubmitJobRequest req;
  rpc::JobSpec* spec = req.mutable_spec();
  spec->set_name(name.empty() ? "alloc" : name);
  spec->set_tenant(tenant);
  spec->set_nodes(nodes);
  spec->set_gpus_per_node(gpus_per_node);
  spec->set_interactive(true);
  spec->set_idle_timeout_s(*timeout);
  spec->set_checkpoint_uri(archive_uri);
  if (!SetEnvironment("alloc", image, volumes, spec)) return kExitUsage;
  if (cmd.after_dashes.empty()) {
    for (const char* a : {"sleep", "infinity"}) spec->add_command(a);
  } else {
    for (const std::string& a : cmd.after_dashes) spec->add_command(a);
  }
  req.set_idempotency_key(NewIdempotencyKey());
  rpc::SubmitJobResponse resp;
  grpc::Status s = SubmitWithRetry(ctx, req, &resp);
  if (!s.ok()) return RpcError("alloc", ctx, s);
  std::cout << (json ? ToJson(resp) : resp.job_id() + "\n");
  return kExitOk;
}

}  // namespace athanor::cli
