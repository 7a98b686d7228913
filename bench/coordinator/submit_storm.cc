#include "bench/coordinator/submit_storm.h"

#include "bench/coordinator/coordinator_process.h"

#include <random>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "proto/athanor.grpc.pb.h"

namespace athanor::bench {
namespace {

using Clock = std::chrono::steady_clock;

std::string CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    default: return absl::StrCat("code ", static_cast<int>(code));
  }
}

// One client: submits until `end`, filling `out` (owned by this client alone).
void Client(const SubmitStormOptions& options, int index, Clock::time_point end,
            SubmitStormResult* out) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("athanor.bench.client", index);
  std::shared_ptr<grpc::ChannelCredentials> creds = BenchCredentials(options.tls_dir, &args);
  std::unique_ptr<rpc::Coordinator::Stub> stub =
      rpc::Coordinator::NewStub(grpc::CreateCustomChannel(options.address, creds, args));
  std::mt19937 rng(options.seed * 7919 + static_cast<uint32_t>(index));
  std::uniform_int_distribution<int> gpus(1, 8);
  for (int64_t seq = 0; Clock::now() < end; ++seq) {
    rpc::SubmitJobRequest req;
    std::string key = absl::StrCat(options.key_prefix, "-", index, "-", seq);
    req.set_idempotency_key(key);
    rpc::JobSpec* spec = req.mutable_spec();
    spec->set_name(key);
    spec->set_tenant(options.tenant);
    spec->set_nodes(1);
    spec->set_gpus_per_node(gpus(rng));
    spec->add_command("true");
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    rpc::SubmitJobResponse resp;
    Clock::time_point sent = Clock::now();
    grpc::Status s = stub->SubmitJob(&ctx, req, &resp);
    if (s.ok()) {
      ++out->accepted;
      out->duplicates += resp.duplicate();
      out->latency_ms.push_back(
          std::chrono::duration<double, std::milli>(Clock::now() - sent).count());
    } else {
      ++out->errors[CodeName(s.error_code())];
    }
  }
}

// The probe: GetJob("/") until `end` ('/' is never valid in an id, so the
// service answers INVALID_ARGUMENT at its edge).
void Probe(const SubmitStormOptions& options, Clock::time_point end, std::vector<double>* out) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("athanor.bench.client", -1);
  std::shared_ptr<grpc::ChannelCredentials> creds = BenchCredentials(options.tls_dir, &args);
  std::unique_ptr<rpc::Coordinator::Stub> stub =
      rpc::Coordinator::NewStub(grpc::CreateCustomChannel(options.address, creds, args));
  rpc::GetJobRequest req;
  req.set_job_id("/");
  while (Clock::now() < end) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    rpc::Job job;
    Clock::time_point sent = Clock::now();
    grpc::Status s = stub->GetJob(&ctx, req, &job);
    if (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
      out->push_back(std::chrono::duration<double, std::milli>(Clock::now() - sent).count());
    }
  }
}

}  // namespace

SubmitStormResult RunSubmitStorm(const SubmitStormOptions& options) {
  std::vector<SubmitStormResult> per_client(options.clients);
  std::vector<std::thread> threads;
  Clock::time_point start = Clock::now();
  Clock::time_point end = start + options.duration;
  SubmitStormResult total;
  threads.emplace_back([&] { Probe(options, end, &total.floor_ms); });
  for (int i = 0; i < options.clients; ++i) {
    threads.emplace_back([&, i] { Client(options, i, end, &per_client[i]); });
  }
  for (std::thread& t : threads) t.join();
  total.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  for (SubmitStormResult& r : per_client) {
    total.accepted += r.accepted;
    total.duplicates += r.duplicates;
    for (const auto& [code, n] : r.errors) total.errors[code] += n;
    total.latency_ms.insert(total.latency_ms.end(), r.latency_ms.begin(), r.latency_ms.end());
  }
  return total;
}

}  // namespace athanor::bench
