// Admin subcommands of the `athanor` CLI: preempt, drain, undrain, usage,
// quota, why and `admin status`. Each prints a human rendering, or the response as JSON
// with --json.
#include <time.h>

#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "launcher/cli_commands.h"
#include "launcher/cli_format.h"
#include "launcher/cli_util.h"

namespace athanor::cli {
namespace {

po::positional_options_description Positional(const char* name) {
  po::positional_options_description p;
  p.add(name, 1);
  return p;
}

// Parses --grace (a duration; empty: 0 = the job's own).
bool GraceSeconds(const std::string& cmd, const std::string& text, int64_t* out) {
  if (text.empty()) {
    *out = 0;
    return true;
  }
  std::optional<int64_t> s = ParseDurationSeconds(text);
  if (!s) {
    std::cerr << "athanor " << cmd << ": --grace expects a duration like 90s, 5m or 1h\n";
    return false;
  }
  *out = *s;
  return true;
}

std::string NodeLine(const rpc::Node& n) {
  return absl::StrCat("node ", n.name(), ": ", StateName(n.state()),
                      n.reason().empty() ? "" : " (" + n.reason() + ")", "\n");
}

}  // namespace

int RunPreempt(CliContext& ctx, const std::vector<std::string>& args) {
  std::string id, grace;
  bool json = false;
  po::options_description desc("athanor preempt options");
  desc.add_options()
      ("job-id", po::value(&id)->required(), "the running job")
      ("grace", po::value(&grace), "time to checkpoint before SIGKILL (default: the job's --grace)")
      ("json", po::bool_switch(&json), "print the job as JSON");
  ParsedCommandLine cmd;
  po::positional_options_description pos = Positional("job-id");
  if (int rc = ParseFlags(args, desc,
                          "usage: athanor preempt ID [--grace DURATION] [--json]\n"
                          "Preempts a running job: its ranks get SIGTERM, checkpoint and exit; "
                          "SIGKILL at the\ndeadline. The job is requeued (no restart is consumed) "
                          "and resumes from its\nnewest committed checkpoint.",
                          &cmd, &pos);
      rc >= 0) {
    return rc;
  }
  rpc::PreemptJobRequest req;
  int64_t g = 0;
  if (!GraceSeconds("preempt", grace, &g)) return kExitUsage;
  req.set_job_id(id);
  req.set_grace_period_s(g);
  rpc::PreemptJobResponse resp;
  grpc::ClientContext c;
  PrepareCall(ctx, &c);
  grpc::Status s = ctx.stub->PreemptJob(&c, req, &resp);
  if (!s.ok()) return RpcError("preempt", ctx, s);
  std::cout << (json ? ToJson(resp)
                     : absl::StrCat("job ", resp.job().id(), ": ", StateName(resp.job().state()),
                                    " (", resp.job().reason(), ")\n"));
  return kExitOk;
}

int RunDrain(CliContext& ctx, const std::vector<std::string>& args) {
  std::string node, grace, reason;
  bool json = false;
  po::options_description desc("athanor drain options");
  desc.add_options()
      ("node", po::value(&node)->required(), "the node")
      ("grace", po::value(&grace), "time each job gets to checkpoint (default: the job's --grace)")
      ("reason", po::value(&reason), "why (shown by `athanor nodes`)")
      ("json", po::bool_switch(&json), "print the node as JSON");
  ParsedCommandLine cmd;
  po::positional_options_description pos = Positional("node");
  if (int rc = ParseFlags(args, desc,
                          "usage: athanor drain NODE [--grace DURATION] [--reason R] [--json]\n"
                          "Drains a node: no new work lands on it, and the attempts running there "
                          "are\npreempted (checkpoint, exit) and requeued. DRAINING becomes DRAINED "
                          "once empty.",
                          &cmd, &pos);
      rc >= 0) {
    return rc;
  }
  int64_t g = 0;
  if (!GraceSeconds("drain", grace, &g)) return kExitUsage;
  rpc::DrainNodeRequest req;
  req.set_node(node);
  req.set_grace_period_s(g);
  req.set_reason(reason);
  rpc::NodeResponse resp;
  grpc::ClientContext c;
  PrepareCall(ctx, &c);
  grpc::Status s = ctx.stub->DrainNode(&c, req, &resp);
  if (!s.ok()) return RpcError("drain", ctx, s);
  std::cout << (json ? ToJson(resp) : NodeLine(resp.node()));
  return kExitOk;
}

int RunUndrain(CliContext& ctx, const std::vector<std::string>& args) {
  std::string node;
  bool json = false;
  po::options_description desc("athanor undrain options");
  desc.add_options()
      ("node", po::value(&node)->required(), "the node")
      ("json", po::bool_switch(&json), "print the node as JSON");
  ParsedCommandLine cmd;
  po::positional_options_description pos = Positional("node");
  if (int rc = ParseFlags(args, desc,
                          "usage: athanor undrain NODE [--json]\nLets a drained node take new "
                          "work again.",
                          &cmd, &pos);
      rc >= 0) {
    return rc;
  }
  rpc::UndrainNodeRequest req;
  req.set_node(node);
  rpc::NodeResponse resp;
  grpc::ClientContext c;
  PrepareCall(ctx, &c);
  grpc::Status s = ctx.stub->UndrainNode(&c, req, &resp);
  if (!s.ok()) return RpcError("undrain", ctx, s);
  std::cout << (json ? ToJson(resp) : NodeLine(resp.node()));
  return kExitOk;
}

int RunUsage(CliContext& ctx, const std::vector<std::string>& args) {
  std::string tenant, since;
  bool json = false;
  po::options_description desc("athanor usage options");
  desc.add_options()
      ("tenant", po::value(&tenant), "only this tenant")
      ("since", po::value(&since),
       "only GPU time after DATE (2026-01-31, 2026-01-31T12:00:00Z) or DURATION ago (7d, 12h)")
      ("json", po::bool_switch(&json), "print the UsageResponse as JSON");
  ParsedCommandLine cmd;
  if (int rc = ParseFlags(args, desc,
                          "usage: athanor usage [--tenant T] [--since DATE|DURATION] [--json]\n"
                          "GPU-seconds per tenant (JOB \"*\") and per job, running attempts "
                          "counted up to now.",
                          &cmd);
      rc >= 0) {
    return rc;
  }
  rpc::UsageRequest req;
  req.set_tenant(tenant);
  if (!since.empty()) {
    std::optional<int64_t> t = ParseSince(since, static_cast<int64_t>(::time(nullptr)));
    if (!t) {
      std::cerr << "athanor usage: --since expects a date (2026-01-31[THH:MM:SS]) or a duration "
                   "(7d, 12h)\n";
      return kExitUsage;
    }
    req.set_since_unix(*t);
  }
  rpc::UsageResponse resp;
  grpc::ClientContext c;
  PrepareCall(ctx, &c);
  grpc::Status s = ctx.stub->Usage(&c, req, &resp);
  if (!s.ok()) return RpcError("usage", ctx, s);
  std::cout << (json ? ToJson(resp) : FormatUsage(resp));
  return kExitOk;
}

int RunQuota(CliContext& ctx, const std::vector<std::string>& args) {
  std::vector<std::string> words;
  bool json = false;
  po::options_description desc("athanor quota options");
  desc.add_options()
      ("words", po::value(&words)->composing(), "set TENANT GPUS | unset TENANT")
      ("json", po::bool_switch(&json), "print the ListQuotasResponse as JSON");
  ParsedCommandLine cmd;
  po::positional_options_description pos;
  pos.add("words", -1);
  // `quota set --help` and `quota unset --help` describe the verb alone.
  const std::string verb = args.size() > 1 ? args[1] : "";
  const std::string usage =
      verb == "set"     ? "usage: athanor quota set TENANT GPUS [--json]\n"
                          "Sets a hard limit on the GPUs a tenant's jobs hold; stored by the coordinator,\n"
                          "it overrides the coordinator's --quota flag for that tenant."
      : verb == "unset" ? "usage: athanor quota unset TENANT [--json]\n"
                          "Removes a tenant's limit set with `athanor quota set`."
                        : "usage: athanor quota [set TENANT GPUS | unset TENANT] [--json]\n"
                          "Without a verb, lists quotas and the GPUs in use. Quotas set here are stored\n"
                          "by the coordinator and override its --quota flags.\n\n"
                          "commands:\n"
                          "  set TENANT GPUS  hard limit on a tenant's GPUs\n"
                          "  unset TENANT     remove the limit";
  if (int rc = ParseFlags(args, desc, usage, &cmd, &pos); rc >= 0) {
    return rc;
  }
  rpc::ListQuotasResponse resp;
  grpc::ClientContext c;
  PrepareCall(ctx, &c);
  grpc::Status s;
  if (words.empty()) {
    s = ctx.stub->ListQuotas(&c, rpc::ListQuotasRequest(), &resp);
  } else {
    rpc::SetQuotaRequest req;
    int32_t gpus = -1;
    if (words[0] == "set" && words.size() == 3 && absl::SimpleAtoi(words[2], &gpus) && gpus >= 0) {
      req.set_tenant(words[1]);
      req.set_gpus(gpus);
    } else if (words[0] == "unset" && words.size() == 2) {
      req.set_tenant(words[1]);
      req.set_gpus(-1);
    } else {
      std::cerr << "athanor quota: expected `set TENANT GPUS` (GPUS >= 0) or `unset TENANT` (see "
                   "--help)\n";
      return kExitUsage;
    }
    s = ctx.stub->SetQuota(&c, req, &resp);
  }
  if (!s.ok()) return RpcError("quota", ctx, s);
  std::cout << (json ? ToJson(resp) : FormatQuotas(resp));
  return kExitOk;
}

int RunWhy(CliContext& ctx, const std::vector<std::string>& args) {
  std::string id;
  bool json = false;
  po::options_description desc("athanor why options");
  desc.add_options()
      ("job-id", po::value(&id)->required(), "the job")
      ("json", po::bool_switch(&json), "print the WhyPendingResponse as JSON");
  ParsedCommandLine cmd;
  po::positional_options_description pos = Positional("job-id");
  if (int rc = ParseFlags(args, desc,
                          "usage: athanor why ID [--json]\nExplains a job's state: for a pending "
                          "job the tenant's quota, which nodes could\nhost it and why none does, "
                          "the reservation it waits behind, its queue position.",
                          &cmd, &pos);
      rc >= 0) {
    return rc;
  }
  rpc::WhyPendingRequest req;
  req.set_job_id(id);
  rpc::WhyPendingResponse resp;
  grpc::ClientContext c;
  PrepareCall(ctx, &c);
  grpc::Status s = ctx.stub->WhyPending(&c, req, &resp);
  if (!s.ok()) return RpcError("why", ctx, s);
  std::cout << (json ? ToJson(resp) : FormatWhy(resp));
  return kExitOk;
}

std::string FormatStateStatus(const rpc::StateStatusResponse& st) {
  std::vector<std::vector<std::string>> kv = {{"backend:", st.backend()}, {"location:", st.location()}};
  if (st.backend() == "etcd") {
    kv.push_back({"leader:", absl::StrCat(st.leader().empty() ? "(none)" : st.leader(), " (term ", st.term(), ")")});
  }
  kv.push_back({"answered by:", st.self()});
  if (st.backend() == "etcd") {
    kv.push_back({"leads since:", st.led_since_unix() > 0 ? FormatUnixTime(st.led_since_unix()) : "(not leading)"});
    kv.push_back({"terms won:", absl::StrCat(st.leadership_changes(), " (by this process)")});
  }
  std::string out = FormatTable(kv);
  if (st.members_size() == 0) return out;
  std::vector<std::vector<std::string>> rows = {
      {"MEMBER", "CLIENT URLS", "REACHABLE", "RAFT LEADER", "RAFT INDEX", "LAG", "DB BYTES"}};
  for (const rpc::StateMember& m : st.members()) {
    std::string urls;
    for (const std::string& u : m.client_urls()) absl::StrAppend(&urls, urls.empty() ? "" : ",", u);
    rows.push_back({m.name().empty() ? "(unnamed)" : m.name(), urls, m.reachable() ? "yes" : "NO",
                    m.is_leader() ? "yes" : "", m.reachable() ? absl::StrCat(m.raft_index()) : "-",
                    m.lag() < 0 ? "-" : absl::StrCat(m.lag()), m.reachable() ? absl::StrCat(m.db_size_bytes()) : "-"});
  }
  return absl::StrCat(out, "\n", FormatTable(rows));
}

int RunAdminStatus(CliContext& ctx, const std::vector<std::string>& args) {
  bool json = false;
  po::options_description desc("athanor admin status options");
  desc.add_options()("json", po::bool_switch(&json), "print the StateStatusResponse as JSON");
  ParsedCommandLine cmd;
  if (int rc = ParseFlags(args, desc,
                          "usage: athanor admin status [--json]\n"
                          "Where the coordinator keeps its state (a SQLite file, or an etcd cluster) and, on\n"
                          "etcd, which coordinator leads, its term (it grows with each new leader), when it\n"
                          "took the lead, and each etcd member: reachable or not, which one leads etcd's\n"
                          "Raft group, and how many log entries it lags behind that leader. Admins only.",
                          &cmd);
      rc >= 0) {
    return rc;
  }
  rpc::StateStatusRequest req;
  rpc::StateStatusResponse resp;
  grpc::ClientContext c;
  PrepareCall(ctx, &c);
  grpc::Status s = ctx.stub->StateStatus(&c, req, &resp);
  if (!s.ok()) return RpcError("admin status", ctx, s);
  std::cout << (json ? ToJson(resp) : FormatStateStatus(resp));
  return kExitOk;
}

}  // namespace athanor::cli
