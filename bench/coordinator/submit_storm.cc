#include "bench/coordinator/submit_storm.h"

#include "testing/coordinator/coordinator_process.h"

#include <memory>
#include <random>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
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

// One client: one submission in flight at a time, each sent from the
// previous one's completion, until `end`. The calls run on gRPC's callback
// threads, so a client costs no thread of its own waking for every answer:
// the bench's CPU stays with the fleet and the coordinator it measures.
// `out` is this client's alone; its calls never overlap.
class Client {
 public:
  Client(const SubmitStormOptions& options, int index, Clock::time_point end,
         SubmitStormResult* out)
      : options_(options), index_(index), end_(end), out_(out),
        rng_(options.seed * 7919 + static_cast<uint32_t>(index)) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("athanor.bench.client", index);
    std::shared_ptr<grpc::ChannelCredentials> creds = BenchCredentials(options.tls_dir, &args);
    stub_ = rpc::Coordinator::NewStub(grpc::CreateCustomChannel(options.address, creds, args));
  }

  void Start() { Send(); }
  void Wait() { finished_.WaitForNotification(); }

 private:
  void Send() {
    req_.Clear();
    std::string key = absl::StrCat(options_.key_prefix, "-", index_, "-", seq_++);
    req_.set_idempotency_key(key);
    rpc::JobSpec* spec = req_.mutable_spec();
    spec->set_name(key);
    spec->set_tenant(options_.tenant);
    spec->set_nodes(1);
    spec->set_gpus_per_node(gpus_(rng_));
    spec->add_command("true");
    ctx_ = std::make_unique<grpc::ClientContext>();
    ctx_->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    resp_.Clear();
    sent_ = Clock::now();
    stub_->async()->SubmitJob(ctx_.get(), &req_, &resp_, [this](grpc::Status s) { Done(s); });
  }

  void Done(const grpc::Status& s) {
    const Clock::time_point now = Clock::now();
    if (s.ok()) {
      ++out_->accepted;
      out_->duplicates += resp_.duplicate();
      out_->latency_ms.push_back(std::chrono::duration<double, std::milli>(now - sent_).count());
    } else {
      ++out_->errors[CodeName(s.error_code())];
    }
    if (now < end_) {
      Send();
    } else {
      finished_.Notify();
    }
  }

  const SubmitStormOptions& options_;
  const int index_;
  const Clock::time_point end_;
  SubmitStormResult* const out_;
  std::unique_ptr<rpc::Coordinator::Stub> stub_;
  std::mt19937 rng_;
  std::uniform_int_distribution<int> gpus_{1, 8};
  int64_t seq_ = 0;
  // The call in flight:
  std::unique_ptr<grpc::ClientContext> ctx_;
  rpc::SubmitJobRequest req_;
  rpc::SubmitJobResponse resp_;
  Clock::time_point sent_;
  absl::Notification finished_;
};

// The probe: GetJob("/") every kProbeEvery until `end` ('/' is never valid
// in an id, so the service answers INVALID_ARGUMENT at its edge). Paced, so
// that measuring the floor does not take a share of the CPU it measures.
constexpr auto kProbeEvery = std::chrono::milliseconds(5);

void Probe(const SubmitStormOptions& options, Clock::time_point end, std::vector<double>* out) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("athanor.bench.client", -1);
  std::shared_ptr<grpc::ChannelCredentials> creds = BenchCredentials(options.tls_dir, &args);
  std::unique_ptr<rpc::Coordinator::Stub> stub =
      rpc::Coordinator::NewStub(grpc::CreateCustomChannel(options.address, creds, args));
  rpc::GetJobRequest req;
  req.set_job_id("/");
  for (Clock::time_point next = Clock::now(); next < end; next += kProbeEvery) {
    std::this_thread::sleep_until(next);  // pacing, not synchronisation
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
  Clock::time_point start = Clock::now();
  Clock::time_point end = start + options.duration;
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < options.clients; ++i) {
    clients.push_back(std::make_unique<Client>(options, i, end, &per_client[i]));
  }
  SubmitStormResult total;
  std::thread probe([&] { Probe(options, end, &total.floor_ms); });
  for (auto& c : clients) c->Start();
  for (auto& c : clients) c->Wait();
  probe.join();
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
