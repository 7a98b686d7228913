#include "launcher/cli_commands.h"

#include <unistd.h>

#include <chrono>
#include <map>
#include <optional>
#include <iostream>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/options.h"
#include "launcher/cli_format.h"
#include "launcher/cli_util.h"

namespace athanor::cli {
namespace {

using Clock = std::chrono::steady_clock;

int Parse(const std::vector<std::string>& args, po::options_description desc,
          const std::string& usage, ParsedCommandLine* out,
          const po::positional_options_description* positional = nullptr) {
  return ParseFlags(args, std::move(desc), usage, out, positional);
}

po::positional_options_description JobIdPositional() {
  po::positional_options_description p;
  p.add("job-id", 1);
  return p;
}

}  // namespace

int RunSubmit(CliContext& ctx, const std::vector<std::string>& args) {
  std::string name, tenant, checkpoint_uri, gpu_model, min_gpu_memory, memory_per_node;
  std::string time_limit, grace, idempotency_key, hang_timeout;
  std::string nodes;
  int32_t gpus_per_node = 1, priority = 0, max_restarts = 0, cpus_per_node = 0;
  int64_t global_batch = 0;
  std::vector<std::string> env, volumes;
  std::string image;
  bool json = false, preemptible = false, move_off_stragglers = false;
  po::options_description desc("athanor submit options");
  desc.add_options()
      ("name", po::value(&name), "job name")
      ("nodes", po::value(&nodes)->required(),
       "nodes in the gang: N, or MIN:MAX for an elastic job that runs on as many as it can get "
       "between the two, shrinks when a node is lost and grows back at a checkpoint")
      ("gpus-per-node", po::value(&gpus_per_node)->required(), "GPUs (ranks) per node")
      ("tenant", po::value(&tenant), "tenant the job is billed to (default: $USER)")
      ("gpu-model", po::value(&gpu_model), "only nodes with this GPU model (e.g. H100)")
      ("min-gpu-memory", po::value(&min_gpu_memory), "only GPUs with at least this memory (80G, 81920M)")
      ("cpus-per-node", po::value(&cpus_per_node), "CPUs needed on each node")
      ("memory-per-node", po::value(&memory_per_node), "RAM needed on each node (64G, 4096M)")
      ("time-limit", po::value(&time_limit), "declared run time (30s, 10m, 2h); helps backfill")
      ("grace", po::value(&grace), "preemption grace: time to checkpoint after SIGTERM (90s, 5m)")
      ("priority", po::value(&priority), "higher runs first")
      ("preemptible", po::bool_switch(&preemptible), "the job may be preempted")
      ("max-restarts", po::value(&max_restarts), "requeue a failed attempt this many times")
      ("global-batch", po::value(&global_batch),
       "samples per optimizer step, kept at every size (ATHANOR_GLOBAL_BATCH for athanor-train); "
       "refused unless every world size the job may run at divides it")
      ("hang-timeout", po::value(&hang_timeout),
       "no progress this long is a hang (45s, 5m); default max(30s, 10x median step)")
      ("move-off-stragglers", po::bool_switch(&move_off_stragglers),
       "when a rank is flagged as a straggler, stop the attempt as a preemption (with --grace) "
       "and requeue it on other nodes, where enough others could host it")
      ("checkpoint-uri", po::value(&checkpoint_uri), "ATHANOR_CHECKPOINT_URI for the ranks")
      ("env", po::value(&env)->composing(), "K=V set for every rank (repeatable)")
      ("image", po::value(&image),
       "run the ranks in this image (`athanor image ls`) instead of the node's root filesystem")
      ("volume", po::value(&volumes)->composing(),
       "NAME:/path[:ro] mounts the tenant's volume at /path in every rank (repeatable; "
       "read-write needs --nodes 1)")
      ("idempotency-key", po::value(&idempotency_key),
       "makes retries safe: a second submit with the same key returns the first job "
       "(default: a fresh random key; lost replies are retried with it)")
      ("json", po::bool_switch(&json), "print {\"job_id\": ...}");
  ParsedCommandLine cmd;
  if (int rc = Parse(args, desc,
                     "usage: athanor submit --nodes N|MIN:MAX --gpus-per-node G [options] -- CMD [ARGS...]\n"
                     "Submits a gang job; prints its id. Every rank runs CMD with the env contract\n"
                     "(RANK, WORLD_SIZE, LOCAL_RANK, NODE_RANK, MASTER_ADDR, MASTER_PORT, ...).",
                     &cmd);
      rc >= 0) {
    return rc;
  }
  if (cmd.after_dashes.empty()) {
    std::cerr << "athanor submit: missing command after '--' (see --help)\n";
    return kExitUsage;
  }
  absl::StatusOr<NodeRange> range = ParseNodeRange(nodes);
  if (!range.ok()) {
    std::cerr << "athanor submit: " << range.status().message() << "\n";
    return kExitUsage;
  }
  std::optional<int64_t> gpu_mem = min_gpu_memory.empty() ? 0 : ParseMegabytes(min_gpu_memory);
  std::optional<int64_t> mem = memory_per_node.empty() ? 0 : ParseMegabytes(memory_per_node);
  std::optional<int64_t> limit = time_limit.empty() ? 0 : ParseDurationSeconds(time_limit);
  std::optional<int64_t> grace_s = grace.empty() ? 0 : ParseDurationSeconds(grace);
  std::optional<int64_t> hang_s = hang_timeout.empty() ? 0 : ParseDurationSeconds(hang_timeout);
  if (!hang_s) {
    std::cerr << "athanor submit: --hang-timeout expects a duration like 45s or 5m\n";
    return kExitUsage;
  }
  if (!gpu_mem || !mem) {
    std::cerr << "athanor submit: --min-gpu-memory/--memory-per-node expect a size like 80G or 4096M\n";
    return kExitUsage;
  }
  if (!limit || !grace_s) {
    std::cerr << "athanor submit: --time-limit/--grace expect a duration like 90s, 10m or 2h\n";
    return kExitUsage;
  }
  rpc::SubmitJobRequest req;
  rpc::JobSpec* spec = req.mutable_spec();
  spec->set_gpu_model(gpu_model);
  spec->set_min_gpu_memory_mb(*gpu_mem);
  spec->set_cpus_per_node(cpus_per_node);
  spec->set_memory_mb_per_node(*mem);
  spec->set_time_limit_s(*limit);
  spec->set_grace_period_s(*grace_s);
  spec->set_name(name);
  spec->set_tenant(tenant);
  spec->set_priority(priority);
  spec->set_preemptible(preemptible);
  spec->set_nodes(range->max);
  spec->set_min_nodes(range->min);
  spec->set_global_batch(global_batch);
  spec->set_gpus_per_node(gpus_per_node);
  spec->set_max_restarts(max_restarts);
  spec->set_hang_timeout_s(*hang_s);
  spec->set_move_off_stragglers(move_off_stragglers);
  spec->set_checkpoint_uri(checkpoint_uri);
  for (const std::string& a : cmd.after_dashes) spec->add_command(a);
  if (!SetEnvironment("submit", image, volumes, spec)) return kExitUsage;
  std::map<std::string, std::string> env_map;
  for (const std::string& kv : env) {
    if (absl::Status bad = ParseEnvAssignment(kv, &env_map); !bad.ok()) {
      std::cerr << "athanor submit: " << bad.message() << "\n";
      return kExitUsage;
    }
  }
  for (const auto& [k, v] : env_map) (*spec->mutable_env())[k] = v;
  req.set_idempotency_key(idempotency_key.empty() ? NewIdempotencyKey() : idempotency_key);
  rpc::SubmitJobResponse resp;
  grpc::Status s = SubmitWithRetry(ctx, req, &resp);
  if (!s.ok()) return RpcError("submit", ctx, s);
  std::cout << (json ? ToJson(resp) : resp.job_id() + "\n");
  return kExitOk;
}

int RunJobs(CliContext& ctx, const std::vector<std::string>& args) {
  bool all = false, json = false;
  std::string tenant;
  po::options_description desc("athanor jobs options");
  desc.add_options()
      ("all", po::bool_switch(&all), "include finished jobs")
      ("tenant", po::value(&tenant), "only this tenant's jobs")
      ("json", po::bool_switch(&json), "print the ListJobsResponse as JSON");
  ParsedCommandLine cmd;
  if (int rc = Parse(args, desc, "usage: athanor jobs [--all] [--tenant T] [--json]\n"
                                 "Lists jobs (unfinished ones unless --all).", &cmd);
      rc >= 0) {
    return rc;
  }
  rpc::ListJobsRequest req;
  req.set_all(all);
  req.set_tenant(tenant);
  rpc::ListJobsResponse resp;
  grpc::ClientContext c;
  PrepareCall(ctx, &c);
  grpc::Status s = ctx.stub->ListJobs(&c, req, &resp);
  if (!s.ok()) return RpcError("jobs", ctx, s);
  std::cout << (json ? ToJson(resp) : FormatJobs(resp));
  return kExitOk;
}

int RunJob(CliContext& ctx, const std::vector<std::string>& args) {
  std::string id;
  bool json = false;
  po::options_description desc("athanor job options");
  desc.add_options()
      ("job-id", po::value(&id)->required(), "the job")
      ("json", po::bool_switch(&json), "print the Job as JSON");
  ParsedCommandLine cmd;
  po::positional_options_description pos = JobIdPositional();
  if (int rc = Parse(args, desc, "usage: athanor job ID [--json]\nShows one job and its ranks.",
                     &cmd, &pos);
      rc >= 0) {
    return rc;
  }
  rpc::Job job;
  grpc::Status s = FetchJob(ctx, id, &job);
  if (!s.ok()) return RpcError("job", ctx, s);
  std::cout << (json ? ToJson(job) : FormatJob(job));
  return kExitOk;
}

int RunNodes(CliContext& ctx, const std::vector<std::string>& args) {
  bool json = false;
  po::options_description desc("athanor nodes options");
  desc.add_options()("json", po::bool_switch(&json), "print the ListNodesResponse as JSON");
  ParsedCommandLine cmd;
  if (int rc = Parse(args, desc, "usage: athanor nodes [--json]\nLists the cluster's nodes.", &cmd);
      rc >= 0) {
    return rc;
  }
  rpc::ListNodesResponse resp;
  grpc::ClientContext c;
  PrepareCall(ctx, &c);
  grpc::Status s = ctx.stub->ListNodes(&c, rpc::ListNodesRequest(), &resp);
  if (!s.ok()) return RpcError("nodes", ctx, s);
  std::cout << (json ? ToJson(resp) : FormatNodes(resp));
  return kExitOk;
}

int RunCancel(CliContext& ctx, const std::vector<std::string>& args) {
  std::string id;
  bool json = false;
  po::options_description desc("athanor cancel options");
  desc.add_options()
      ("job-id", po::value(&id)->required(), "the job")
      ("json", po::bool_switch(&json), "print the job as JSON");
  ParsedCommandLine cmd;
  po::positional_options_description pos = JobIdPositional();
  if (int rc = Parse(args, desc,
                     "usage: athanor cancel ID [--json]\nCancels a job: its ranks get SIGTERM, "
                     "then SIGKILL.", &cmd, &pos);
      rc >= 0) {
    return rc;
  }
  rpc::CancelJobRequest req;
  req.set_job_id(id);
  rpc::CancelJobResponse resp;
  grpc::ClientContext c;
  PrepareCall(ctx, &c);
  grpc::Status s = ctx.stub->CancelJob(&c, req, &resp);
  if (!s.ok()) return RpcError("cancel", ctx, s);
  std::cout << (json ? ToJson(resp)
                     : absl::StrCat("job ", resp.job().id(), ": ", StateName(resp.job().state()),
                                    resp.job().reason().empty() ? "" : " (" + resp.job().reason() + ")",
                                    "\n"));
  return kExitOk;
}

int RunWait(CliContext& ctx, const std::vector<std::string>& args) {
  std::string id;
  double timeout_s = 0;
  int64_t interval_ms = 200;
  bool json = false;
  po::options_description desc("athanor wait options");
  desc.add_options()
      ("job-id", po::value(&id)->required(), "the job")
      ("timeout", po::value(&timeout_s), "give up after S seconds (exit 124); 0: never")
      ("interval-ms", po::value(&interval_ms), "polling interval")
      ("json", po::bool_switch(&json), "print the final Job as JSON");
  ParsedCommandLine cmd;
  po::positional_options_description pos = JobIdPositional();
  if (int rc = Parse(args, desc,
                     "usage: athanor wait ID [--timeout S]\nWaits for the job to finish. Exit 0 "
                     "when it SUCCEEDED, 3 when it FAILED or was CANCELLED,\n124 on timeout, 1 "
                     "when the coordinator refuses (it is retried while unreachable).",
                     &cmd, &pos);
      rc >= 0) {
    return rc;
  }
  if (timeout_s < 0 || interval_ms <= 0) {
    std::cerr << "athanor wait: --timeout must be >= 0 and --interval-ms > 0\n";
    return kExitUsage;
  }
  Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  rpc::Job job;
  for (;;) {
    grpc::Status s = FetchJob(ctx, id, &job, 5);
    // A restarting coordinator is waited for; a refusal is final.
    if (!s.ok() && s.error_code() != grpc::StatusCode::UNAVAILABLE &&
        s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
      return RpcError("wait", ctx, s);
    }
    if (s.ok() && (job.state() == rpc::JOB_SUCCEEDED || job.state() == rpc::JOB_FAILED ||
                   job.state() == rpc::JOB_CANCELLED)) {
      break;
    }
    if (timeout_s > 0 && Clock::now() >= deadline) {
      std::cerr << "athanor wait: timed out after " << timeout_s << " s; job " << id << " is "
                << (s.ok() ? StateName(job.state()) : "unknown (coordinator unreachable)") << "\n";
      return kExitTimeout;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
  }
  if (json) {
    std::cout << ToJson(job);
  } else {
    std::cout << "job " << job.id() << " " << StateName(job.state())
              << (job.reason().empty() ? "" : ": " + job.reason()) << "\n";
  }
  return job.state() == rpc::JOB_SUCCEEDED ? kExitOk : kExitJobNotSucceeded;
}

int RunLogs(CliContext& ctx, const std::vector<std::string>& args) {
  std::string id;
  int32_t rank = -1, attempt = 0;
  bool json = false;
  po::options_description desc("athanor logs options");
  desc.add_options()
      ("job-id", po::value(&id)->required(), "the job")
      ("rank", po::value(&rank), "only this rank (default: all)")
      ("attempt", po::value(&attempt), "attempt number, 1 for the first (default: the newest)")
      ("json", po::bool_switch(&json), "print every page as one GetLogsResponse in JSON");
  ParsedCommandLine cmd;
  po::positional_options_description pos = JobIdPositional();
  if (int rc = Parse(args, desc,
                     "usage: athanor logs ID [--rank R] [--attempt N]\nPrints the ranks' output "
                     "(last MiB each) of the newest attempt or of attempt N (1 is the first), "
                     "every line prefixed with \"[rank R] \".", &cmd, &pos);
      rc >= 0) {
    return rc;
  }
  // Pages until the coordinator says the last one came; every page after the
  // first names the attempt the first came from, so they all match.
  rpc::GetLogsRequest req;
  req.set_job_id(id);
  req.set_rank(rank);
  req.set_attempt(attempt);
  rpc::GetLogsResponse all;
  int rc = kExitOk;
  for (;;) {
    rpc::GetLogsResponse page;
    grpc::ClientContext c;
    PrepareCall(ctx, &c, 30);
    grpc::Status s = ctx.stub->GetLogs(&c, req, &page);
    if (!s.ok()) return RpcError("logs", ctx, s);
    for (rpc::RankLog& log : *page.mutable_logs()) {
      if (json) {
        *all.add_logs() = std::move(log);
      } else if (!log.error().empty()) {
        std::cerr << "athanor logs: rank " << log.rank() << ": " << log.error() << "\n";
        rc = kExitRpcError;
      } else {
        std::cout << PrefixLines(log.rank(), log.data());
      }
    }
    all.set_attempt(page.attempt());
    // A coordinator that does not page answers 0; one that does never goes back.
    if (page.next_page_start() <= req.page_start()) break;
    req.set_page_start(page.next_page_start());
    req.set_attempt(page.attempt());
  }
  if (json) std::cout << ToJson(all);
  return rc;
}

}  // namespace athanor::cli
