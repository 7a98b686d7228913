// `athanor alloc --keep JOB`: counts as use of a running interactive
// instance now (Interactive.KeepInstance), so its idle clock starts over and
// a pending idle warning is withdrawn: one more idle period.
#include <iostream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "launcher/cli_commands.h"
#include "launcher/cli_format.h"
#include "launcher/cli_util.h"
#include "proto/athanor_interactive.grpc.pb.h"

namespace athanor::cli {

int RunAllocKeep(CliContext& ctx, const std::vector<std::string>& args) {
  std::string job;
  bool json = false;
  po::options_description desc("athanor alloc --keep options");
  desc.add_options()
      ("keep", po::value(&job)->required(), "the instance (job id) to keep")
      ("json", po::bool_switch(&json), "print the Job as JSON");
  ParsedCommandLine cmd;
  if (int rc = ParseFlags(args, desc,
                          "usage: athanor alloc --keep JOB\n"
                          "Counts as use of a running interactive instance now: its idle clock "
                          "starts over\n(one more idle period) and an idle warning is withdrawn.",
                          &cmd);
      rc >= 0) {
    return rc;
  }
  std::unique_ptr<rpc::Interactive::Stub> stub = rpc::Interactive::NewStub(ctx.channel);
  grpc::ClientContext c;
  PrepareCall(ctx, &c);
  rpc::KeepInstanceRequest req;
  req.set_job_id(job);
  rpc::Job out;
  if (grpc::Status s = stub->KeepInstance(&c, req, &out); !s.ok()) return RpcError("alloc --keep", ctx, s);
  if (json) {
    std::cout << ToJson(out);
  } else if (out.reclaim_at_unix() > 0) {
    std::cout << "kept " << out.id() << ": reclaimed if idle until "
              << FormatUnixTime(out.reclaim_at_unix()) << "\n";
  } else {
    std::cout << "kept " << out.id() << "\n";
  }
  return kExitOk;
}

}  // namespace athanor::cli
