#include "launcher/cli_util.h"

#include <time.h>

#include <chrono>
#include <iostream>
#include <random>
#include <thread>

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

std::string NewIdempotencyKey() {
  std::random_device rd;  // /dev/urandom on Linux
  std::string key;
  for (int i = 0; i < 4; ++i) absl::StrAppend(&key, absl::Hex(rd(), absl::kZeroPad8));
  return key;
}

grpc::Status SubmitWithRetry(const CliContext& ctx, const rpc::SubmitJobRequest& req,
                             rpc::SubmitJobResponse* resp, int attempts) {
  grpc::Status s;
  for (int i = 0; i < attempts; ++i) {
    if (i > 0) {
      std::cerr << "athanor: coordinator did not answer (" << s.error_message()
                << "); retrying the submission with the same key\n";
      std::this_thread::sleep_for(std::chrono::milliseconds(200 << i));  // backoff
    }
    grpc::ClientContext c;
    PrepareCall(ctx, &c);
    resp->Clear();
    s = ctx.stub->SubmitJob(&c, req, resp);
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE &&
        s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
      break;
    }
  }
  return s;
}

grpc::Status FetchJob(const CliContext& ctx, const std::string& id, rpc::Job* job, int deadline_s) {
  rpc::GetJobRequest req;
  req.set_job_id(id);
  grpc::ClientContext c;
  PrepareCall(ctx, &c, deadline_s);
  job->Clear();
  return ctx.stub->GetJob(&c, req, job);
}

bool SetEnvironment(const std::string& verb, const std::string& image, const std::vector<std::string>& volumes,
                    rpc::JobSpec* spec) {
  spec->set_image(image);
  for (const std::string& text : volumes) {
    absl::StatusOr<VolumeArg> v = ParseVolumeArg(text);
    if (!v.ok()) {
      std::cerr << "athanor " << verb << ": " << v.status().message() << "\n";
      return false;
    }
    rpc::VolumeMount* m = spec->add_volumes();
    m->set_name(v->name);
    m->set_path(v->path);
    m->set_read_only(v->read_only);
  }
  return true;
}

}  // namespace athanor::cli
