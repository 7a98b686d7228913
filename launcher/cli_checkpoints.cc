// `athanor checkpoints JOB [--uri URI] [--json]`: the committed checkpoint
// steps of a job, read straight from its checkpoint store (checkpoint/
// catalog.h ListCommitted). The store URI is --uri, else
// $ATHANOR_CHECKPOINT_URI, else the job's checkpoint_uri from the
// coordinator (GetJob). The checkpoint job name is JOB, which is what
// athanor-train uses ($ATHANOR_JOB_ID under the agent).
#include <cstdlib>
#include <iostream>

#include "checkpoint/builtin_stores.h"
#include "checkpoint/catalog.h"
#include "checkpoint/object_store.h"
#include "launcher/cli_commands.h"
#include "launcher/cli_util.h"

namespace athanor::cli {

int RunCheckpoints(CliContext& ctx, const std::vector<std::string>& args) {
  std::string id, uri;
  bool json = false;
  po::options_description desc("athanor checkpoints options");
  desc.add_options()
      ("job-id", po::value(&id)->required(), "the job (its checkpoint job name)")
      ("uri", po::value(&uri),
       "checkpoint store URI (file:///dir, s3://bucket/prefix?...); default "
       "$ATHANOR_CHECKPOINT_URI, else the job's checkpoint_uri from the coordinator")
      ("json", po::bool_switch(&json), "print a JSON array");
  ParsedCommandLine cmd;
  po::positional_options_description pos;
  pos.add("job-id", 1);
  if (int rc = ParseFlags(args, desc,
                          "usage: athanor checkpoints JOB [--uri URI] [--json]\n"
                          "Lists a job's committed checkpoints: step, size, commit time, world "
                          "size.",
                          &cmd, &pos);
      rc >= 0) {
    return rc;
  }
  if (uri.empty()) {
    const char* env = std::getenv("ATHANOR_CHECKPOINT_URI");
    if (env != nullptr) uri = env;
  }
  if (uri.empty()) {
    rpc::Job job;
    grpc::Status s = FetchJob(ctx, id, &job);
    if (!s.ok()) return RpcError("checkpoints", ctx, s);
    uri = job.spec().checkpoint_uri();
    if (uri.empty()) {
      std::cerr << "athanor checkpoints: job " << id
                << " has no checkpoint_uri; pass --uri or set $ATHANOR_CHECKPOINT_URI\n";
      return kExitUsage;
    }
  }
  RegisterBuiltinObjectStores();
  absl::StatusOr<std::unique_ptr<ObjectStore>> store = OpenObjectStore(uri);
  if (!store.ok()) {
    std::cerr << "athanor checkpoints: " << store.status().ToString() << "\n";
    return kExitUsage;
  }
  absl::StatusOr<std::vector<CommittedStep>> steps = ListCommitted(store->get(), id);
  if (!steps.ok()) {
    std::cerr << "athanor checkpoints: " << steps.status().ToString() << "\n";
    return kExitRpcError;
  }
  std::cout << (json ? FormatCommittedJson(*steps) : FormatCommittedTable(*steps));
  return kExitOk;
}

}  // namespace athanor::cli
