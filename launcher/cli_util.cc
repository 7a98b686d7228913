#include "launcher/cli_util.h"

#include <time.h>

#include <chrono>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace athanor::cli {

int ParseFlags(const std::vector<std::string>& args, po::options_description desc,
               const std::string& usage, ParsedCommandLine* out,
               const po::positional_options_description* positional) {
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  absl::Status s = ParseOptions(static_cast<int>(argv.size()), argv.data(), std::move(desc), usage,
                                out, positional);
  if (!s.ok()) {
    std::string msg(s.message());
    if (msg.find("'--job-id' is required") != std::string::npos) msg = "missing job ID (see --help)";
    if (msg.find("'--node' is required") != std::string::npos) msg = "missing node name (see --help)";
    std::cerr << "athanor " << args[0] << ": " << msg << "\n";
    return kExitUsage;
  }
  return out->help ? kExitOk : -1;
}

int RpcError(const std::string& what, const CliContext& ctx, const grpc::Status& s) {
  std::cerr << "athanor " << what << ": " << s.error_message() << " ("
            << absl::StatusCodeToString(static_cast<absl::StatusCode>(s.error_code()))
            << ", coordinator " << ctx.coordinator << ")\n";
  return kExitRpcError;
}

void PrepareCall(const CliContext& ctx, grpc::ClientContext* c, int deadline_s) {
  c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(deadline_s));
  if (!ctx.user.empty()) c->AddMetadata("x-athanor-user", ctx.user);
}

grpc::Status FetchJob(const CliContext& ctx, const std::string& id, rpc::Job* job, int deadline_s) {
  rpc::GetJobRequest req;
  req.set_job_id(id);
  grpc::ClientContext c;
  PrepareCall(ctx, &c, deadline_s);
  job->Clear();
  return ctx.stub->GetJob(&c, req, job);
}

}  // namespace athanor::cli
