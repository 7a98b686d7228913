// `athanor alloc`: an interactive allocation, i.e. a gang job that runs CMD
// (default: a placeholder sleeping until killed) and is reclaimed by the
// coordinator after --idle-timeout without use.
#include <cstdlib>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "launcher/cli_commands.h"
#include "launcher/cli_format.h"
#include "launcher/cli_snapshots.h"
#include "launcher/cli_util.h"

namespace athanor::cli {

int RunAlloc(CliContext& ctx, const std::vector<std::string>& args) {
  for (const std::string& a : args) {  // `athanor alloc --keep JOB` (cli_keep.cc)
    if (a == "--") break;
    if (a == "--keep" || a.rfind("--keep=", 0) == 0) return RunAllocKeep(ctx, args);
  }
  int32_t nodes = 0, gpus_per_node = 0;  // 0: unset (1, or a restored snapshot's)
  std::string idle_timeout, name, tenant, archive_uri, image, restore, resume;
  std::vector<std::string> volumes;
  bool json = false, notebook = false;
  po::options_description desc("athanor alloc options");
  desc.add_options()
      ("nodes", po::value(&nodes), "nodes in the gang (default 1)")
      ("gpus-per-node", po::value(&gpus_per_node), "GPUs per node (default 1)")
      ("idle-timeout", po::value(&idle_timeout),
       "reclaim after this long without use (30s, 10m, 1h); required unless restoring")
      ("restore", po::value(&restore),
       "start from this instance snapshot (`athanor snapshots`): its work dirs and volumes; its "
       "shape, image, volumes, idle timeout and command unless given")
      ("resume", po::value(&resume), "start from the newest complete snapshot of this job (as --restore)")
      ("name", po::value(&name), "allocation name")
      ("tenant", po::value(&tenant), "tenant billed (default: $USER)")
      ("archive-uri", po::value(&archive_uri),
       "object store that keeps the work dirs when reclaimed (default: the agent's --archive-uri)")
      ("image", po::value(&image),
       "run in this image (`athanor image ls`) instead of the node's root filesystem")
      ("volume", po::value(&volumes)->composing(),
       "NAME:/path[:ro] mounts the tenant's volume at /path (repeatable; read-write needs --nodes 1)")
      ("notebook", po::bool_switch(&notebook),
       "run a Jupyter notebook server in each rank (the coordinator writes its command; "
       "open it at /notebook/JOB/ on the coordinator's --notebook-listen address)")
      ("json", po::bool_switch(&json), "print {\"job_id\": ...}");
  ParsedCommandLine cmd;
  if (int rc = ParseFlags(args, desc,
                          "usage: athanor alloc --nodes N --gpus-per-node G --idle-timeout DURATION "
                          "[--restore SNAP | --resume JOB] [-- CMD [ARGS...]]\n"
                          "Holds a gang for interactive work; prints its job id. CMD (e.g. a "
                          "notebook server)\nruns once per GPU in its own work dir; without CMD a "
                          "placeholder sleeps until\nreclaimed. Use is measured (GPU or CPU, network, "
                          "disk, notebook kernels, shell input);\nidle past the timeout, the "
                          "allocation is warned (`athanor alloc --keep JOB` keeps it\none more "
                          "idle period), then "
                          "reclaimed (CANCELLED) and its work dirs archived as\n"
                          "<job>/workdir/rank-<r>.tar. `athanor cancel ID` releases it.",
                          &cmd);
      rc >= 0) {
    return rc;
  }
  std::optional<rpc::InstanceSnapshot> from;
  if (!restore.empty() && !resume.empty()) {
    std::cerr << "athanor alloc: give --restore or --resume, not both\n";
    return kExitUsage;
  }
  if (!restore.empty() || !resume.empty()) {
    absl::StatusOr<rpc::InstanceSnapshot> found = FindSnapshot(ctx, restore, resume);
    if (!found.ok()) {
      std::cerr << "athanor alloc: " << found.status().message() << "\n";
      return kExitUsage;
    }
    from = *std::move(found);
  }
  std::optional<int64_t> timeout = ParseDurationSeconds(idle_timeout);
  if (idle_timeout.empty() && from) timeout = from->spec().idle_timeout_s();
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
  if (notebook && !cmd.after_dashes.empty()) {
    std::cerr << "athanor alloc: --notebook runs the coordinator's notebook command; give no CMD\n";
    return kExitUsage;
  }
  spec->set_notebook(notebook);
  if (notebook) {
    // The coordinator writes the command (coordinator/core/notebook_command.h).
  } else if (cmd.after_dashes.empty()) {
    for (const char* a : {"sleep", "infinity"}) spec->add_command(a);
  } else {
    for (const std::string& a : cmd.after_dashes) spec->add_command(a);
  }
  if (from) {
    if (cmd.after_dashes.empty() && !notebook) spec->clear_command();  // the snapshot's, unless given
    FillFromSnapshot(*from, spec);
    if (spec->command().empty() && !spec->notebook()) {
      for (const char* a : {"sleep", "infinity"}) spec->add_command(a);
    }
  }
  if (spec->nodes() == 0) spec->set_nodes(1);
  if (spec->gpus_per_node() == 0) spec->set_gpus_per_node(1);
  req.set_idempotency_key(NewIdempotencyKey());
  rpc::SubmitJobResponse resp;
  grpc::Status s = SubmitWithRetry(ctx, req, &resp);
  if (!s.ok()) return RpcError("alloc", ctx, s);
  std::cout << (json ? ToJson(resp) : resp.job_id() + "\n");
  if (notebook && !json) {
    // The CLI does not know the coordinator's HTTPS address; the operator may
    // name it in ATHANOR_NOTEBOOK_URL (e.g. https://coordinator:8444).
    const char* base = std::getenv("ATHANOR_NOTEBOOK_URL");
    std::cerr << "notebook: " << (base != nullptr ? base : "https://<coordinator --notebook-listen>")
              << "/notebook/" << resp.job_id() << "/ (log in with your token at /notebook-login)\n";
  }
  return kExitOk;
}

}  // namespace athanor::cli
