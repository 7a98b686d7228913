#include "launcher/cli_format.h"

#include <time.h>

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "google/protobuf/util/json_util.h"

namespace athanor::cli {
namespace {

std::string Exit(const rpc::RankExit& r) {
  if (!r.exited()) return "";
  if (r.signal() != 0) return absl::StrCat(r.exit_code(), " (signal ", r.signal(), ")");
  return absl::StrCat(r.exit_code());
}

std::string RankPhase(const rpc::RankExit& r) {
  if (r.exited()) return "EXITED";
  return r.started() ? "RUNNING" : "STARTING";
}

}  // namespace

std::string StateName(rpc::JobState s) {
  return std::string(absl::StripPrefix(rpc::JobState_Name(s), "JOB_"));
}

std::string StateName(rpc::NodeState s) {
  return std::string(absl::StripPrefix(rpc::NodeState_Name(s), "NODE_"));
}

std::string EscapeControls(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) {
      absl::StrAppend(&out, "\\x", absl::Hex(c, absl::kZeroPad2));
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

std::string FormatTable(const std::vector<std::vector<std::string>>& raw_rows) {
  // Names, commands and reasons come from tenants and agents: a terminal gets
  // their control characters (escape sequences, carriage returns) escaped.
  std::vector<std::vector<std::string>> rows = raw_rows;
  for (auto& row : rows) {
    for (std::string& cell : row) cell = EscapeControls(cell);
  }
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    absl::StrAppend(&out, absl::StripTrailingAsciiWhitespace(line), "\n");
  }
  return out;
}

std::string FormatJobs(const rpc::ListJobsResponse& jobs) {
  std::vector<std::vector<std::string>> rows = {
      {"ID", "NAME", "TENANT", "STATE", "ATTEMPT", "NODES", "GPUS/NODE", "REASON"}};
  for (const rpc::Job& j : jobs.jobs()) {
    rows.push_back({j.id(), j.spec().name(), j.spec().tenant(), StateName(j.state()),
                    absl::StrCat(j.attempt()),
                    j.spec().min_nodes() > 0 && j.spec().min_nodes() < j.spec().nodes()
                        ? absl::StrCat(j.spec().min_nodes(), "..", j.spec().nodes())
                        : absl::StrCat(j.spec().nodes()),
                    absl::StrCat(j.spec().gpus_per_node()), j.reason()});
  }
  return FormatTable(rows);
}

// An elastic job: "2 of 2..3 node(s) x 1 GPU(s), elastic" while it runs.
std::string GangLine(const rpc::Job& j) {
  const rpc::JobSpec& s = j.spec();
  const bool elastic = s.min_nodes() > 0 && s.min_nodes() < s.nodes();
  if (!elastic) return absl::StrCat(s.nodes(), " node(s) x ", s.gpus_per_node(), " GPU(s)");
  std::set<std::string> now;
  for (const rpc::RankPlacement& p : j.allocation()) now.insert(p.node());
  const bool running = j.state() == rpc::JOB_STARTING || j.state() == rpc::JOB_RUNNING ||
                       j.state() == rpc::JOB_PREEMPTING;
  return absl::StrCat(running ? absl::StrCat(now.size(), " of ") : "", s.min_nodes(), "..", s.nodes(),
                      " node(s) x ", s.gpus_per_node(), " GPU(s), elastic");
}

// Every resize of an elastic job: when, from which size to which, why and
// the steps it threw away.
std::vector<std::string> ResizeLines(const rpc::Job& j) {
  std::vector<std::string> out;
  for (int i = 0; i < j.attempts_size(); ++i) {
    const rpc::AttemptNodes& a = j.attempts(i);
    if (a.outcome() != "shrunk" && a.outcome() != "grown") continue;
    const std::string next = i + 1 < j.attempts_size() ? absl::StrCat(j.attempts(i + 1).nodes_size()) : "?";
    out.push_back(absl::StrCat(FormatUnixTime(static_cast<int64_t>(a.end_unix())), " attempt ", a.attempt(), ": ",
                               a.outcome(), " ", a.nodes_size(), " -> ", next, " node(s), ", a.steps_lost(),
                               " step(s) lost: ", a.end_reason()));
  }
  return out;
}

std::string FormatJob(const rpc::Job& j) {
  std::vector<std::vector<std::string>> kv = {
      {"id:", j.id()},
      {"name:", j.spec().name()},
      {"tenant:", j.spec().tenant()},
      {"state:", StateName(j.state())},
      {"reason:", j.reason()},
      {"attempt:", absl::StrCat(j.attempt(), " (restarts ", j.restarts(), " of ",
                                j.spec().max_restarts(), ")")},
      {"gang:", GangLine(j)},
      {"command:", absl::StrJoin(j.spec().command(), " ")},
      {"master:", absl::StrCat(j.master_addr(), ":", j.master_port())},
  };
  if (!j.spec().image().empty()) kv.push_back({"image:", j.spec().image()});
  if (j.spec().volumes_size() > 0) {
    std::vector<std::string> mounts;
    for (const rpc::VolumeMount& v : j.spec().volumes()) {
      mounts.push_back(absl::StrCat(v.name(), ":", v.path(), v.read_only() ? ":ro" : ""));
    }
    kv.push_back({"volumes:", absl::StrJoin(mounts, ", ")});
  }
  if (!j.spec().checkpoint_uri().empty()) {
    kv.push_back({"checkpoint:", j.committed_step() < 0
                                     ? std::string("none committed")
                                     : absl::StrCat("step ", j.committed_step(), " committed")});
  }
  if (j.spec().global_batch() > 0) {
    kv.push_back({"global batch:", absl::StrCat(j.spec().global_batch(), " samples a step at every size")});
  }
  for (const std::string& line : ResizeLines(j)) kv.push_back({"resize:", line});
  if (j.attempts_size() > 1) {
    std::vector<std::string> attempts;
    for (const rpc::AttemptNodes& a : j.attempts()) {
      attempts.push_back(absl::StrCat(a.attempt(), " on ", absl::StrJoin(a.nodes(), ","),
                                      a.outcome().empty() ? "" : absl::StrCat(" (", a.outcome(), ")")));
    }
    kv.push_back({"attempts:", absl::StrJoin(attempts, "; ")});
  }
  for (const rpc::RankFlag& f : j.stragglers()) {
    kv.push_back({"straggler:", absl::StrCat("rank ", f.rank(), " on ", f.node(), ": ", f.reason())});
  }
  if (j.spec().move_off_stragglers() || j.avoid_nodes_size() > 0) {
    kv.push_back({"stragglers:", j.avoid_nodes_size() == 0
                                     ? std::string("moves off a straggler's node")
                                     : absl::StrCat("moves off a straggler's node; avoids ",
                                                    absl::StrJoin(j.avoid_nodes(), ", "))});
  }
  if (j.has_last_hang()) {
    kv.push_back({"last hang:", absl::StrCat("attempt ", j.last_hang().attempt(), ": ",
                                              j.last_hang().reason())});
  }
  // Interactive instances: which use last counted, when idleness reclaims
  // it; any attempt that ended out of memory: what to try.
  if (j.has_last_activity()) {
    const rpc::Activity& a = j.last_activity();
    kv.push_back({"last activity:", absl::StrCat(a.signal(), a.detail().empty() ? "" : " (" + a.detail() + ")",
                                                 " at ", FormatUnixTime(a.at_unix()))});
  }
  if (j.reclaim_at_unix() > 0) {
    const bool warned = absl::StartsWith(j.reason(), "idle since");
    kv.push_back({"reclaim:", absl::StrCat(FormatUnixTime(j.reclaim_at_unix()),
                                           warned ? " (idle: warned; `athanor alloc --keep` extends it)"
                                                  : " if idle until then")});
  }
  if (!j.advice().empty()) kv.push_back({"advice:", absl::StrCat("out of memory: ", j.advice())});
  std::string out = FormatTable(kv);
  if (j.allocation_size() > 0) {
    std::vector<std::vector<std::string>> rows = {
        {"RANK", "NODE", "NODE_RANK", "LOCAL_RANK", "GPUS", "STATE", "EXIT"}};
    for (int i = 0; i < j.allocation_size(); ++i) {
      const rpc::RankPlacement& p = j.allocation(i);
      rpc::RankExit r = i < j.ranks_size() ? j.ranks(i) : rpc::RankExit();
      rows.push_back({absl::StrCat(p.rank()), p.node(), absl::StrCat(p.node_rank()),
                      absl::StrCat(p.local_rank()), absl::StrJoin(p.gpu_ids(), ","), RankPhase(r),
                      Exit(r)});
    }
    absl::StrAppend(&out, "\n", FormatTable(rows));
  }
  return out;
}

std::string FormatNodes(const rpc::ListNodesResponse& nodes) {
  std::vector<std::vector<std::string>> rows = {{"NAME", "STATE", "GPUS", "ALLOCATED", "MODEL",
                                                 "GPU-MEM", "CPUS", "MEM", "LABELS", "HOST",
                                                 "AGENT", "JOBS", "REASON"}};
  for (const rpc::Node& n : nodes.nodes()) {
    const rpc::NodeInventory& inv = n.inventory();
    std::vector<std::string> labels;
    for (const auto& [k, v] : inv.labels()) labels.push_back(absl::StrCat(k, "=", v));
    std::sort(labels.begin(), labels.end());
    std::string state = StateName(n.state());
    if (n.unsandboxed()) absl::StrAppend(&state, " (unsandboxed)");
    rows.push_back({n.name(), state, absl::StrCat(inv.gpus()),
                    absl::StrCat(n.gpus_allocated()), inv.gpu_model().empty() ? "-" : inv.gpu_model(),
                    inv.gpu_memory_mb() > 0 ? absl::StrCat(inv.gpu_memory_mb(), "M") : "-",
                    absl::StrCat(inv.cpus()),
                    inv.memory_mb() > 0 ? absl::StrCat(inv.memory_mb(), "M") : "-",
                    labels.empty() ? "-" : absl::StrJoin(labels, ","), n.host(), n.agent_address(),
                    absl::StrJoin(n.jobs(), ","), n.reason()});
  }
  return FormatTable(rows);
}

std::string FormatUsage(const rpc::UsageResponse& usage) {
  std::vector<std::vector<std::string>> rows = {
      {"TENANT", "JOB", "GPU-SECONDS", "GPU-HOURS", "GPUS IN USE"}};
  for (const rpc::UsageRow& r : usage.rows()) {
    rows.push_back({r.tenant(), r.job_id().empty() ? "*" : r.job_id(),
                    absl::StrFormat("%.1f", r.gpu_seconds()),
                    absl::StrFormat("%.3f", r.gpu_seconds() / 3600.0), absl::StrCat(r.gpus_in_use())});
  }
  return FormatTable(rows);
}

std::string FormatQuotas(const rpc::ListQuotasResponse& quotas) {
  std::vector<std::vector<std::string>> rows = {{"TENANT", "QUOTA GPUS", "GPUS IN USE"}};
  for (const rpc::QuotaRow& q : quotas.quotas()) {
    rows.push_back({q.tenant(), absl::StrCat(q.gpus()), absl::StrCat(q.gpus_in_use())});
  }
  return FormatTable(rows);
}

std::string FormatWhy(const rpc::WhyPendingResponse& why) {
  std::string out = absl::StrCat("job ", why.job_id(), ": ", StateName(why.state()), "\n");
  for (const std::string& r : why.reasons()) absl::StrAppend(&out, "  - ", r, "\n");
  return out;
}

std::string PrefixLines(int32_t rank, const std::string& data) {
  std::string out;
  std::string prefix = absl::StrCat("[rank ", rank, "] ");
  std::vector<absl::string_view> lines = absl::StrSplit(data, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  for (absl::string_view line : lines) absl::StrAppend(&out, prefix, line, "\n");
  return out;
}

std::string FormatUnixTime(int64_t unix_seconds) {
  if (unix_seconds == 0) return "never";
  time_t t = static_cast<time_t>(unix_seconds);
  char buf[32];
  struct tm tm;
  strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
  return buf;
}

std::string ToJson(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(m, &out, options).ok()) return "{}\n";
  return out + "\n";
}

}  // namespace athanor::cli
