#include "coordinator/store/record_codec.h"

#include <stdexcept>
#include <type_traits>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/json_writer.h"

namespace athanor::coord {
namespace {

using nlohmann::json;

// A field the store can no longer trust (a record written by hand or torn
// by a disk fault): the record is refused with DataLoss, never converted with
// undefined behaviour.
struct BadField : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <typename T>
void Get(const json& j, const char* key, T* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    // nlohmann converts a float (any number past int64) to T unchecked.
    if (!it->is_number_integer()) throw BadField(absl::StrCat(key, ": not an integer"));
    const bool fits = it->is_number_unsigned()
                          ? std::in_range<T>(it->template get<uint64_t>())
                          : std::in_range<T>(it->template get<int64_t>());
    if (!fits) throw BadField(absl::StrCat(key, ": out of range"));
  }
  *out = it->template get<T>();
}

template <typename T>
void GetInts(const json& j, const char* key, std::vector<T>* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  if (!it->is_array()) throw BadField(absl::StrCat(key, ": not an array"));
  out->clear();
  for (size_t i = 0; i < it->size(); ++i) {
    json item{{key, (*it)[i]}};
    T v{};
    Get(item, key, &v);
    out->push_back(v);
  }
}

template <typename Enum>
Enum GetEnum(const json& j, const char* key, Enum fallback, Enum last) {
  int value = static_cast<int>(fallback);
  Get(j, key, &value);
  if (value < 0 || value > static_cast<int>(last)) {
    throw BadField(absl::StrCat(key, ": ", value, " is not a known state"));
  }
  return static_cast<Enum>(value);
}

void WriteSpec(const JobSpec& s, JsonWriter& w) {
  w.Open('{');
  w.Key("name").Str(s.name).Key("tenant").Str(s.tenant);
  w.Key("priority").Int(s.priority).Key("preemptible").Bool(s.preemptible);
  w.Key("nodes").Int(s.nodes).Key("gpus_per_node").Int(s.gpus_per_node);
  w.Key("command").Strs(s.command).Key("env").StrMap(s.env);
  w.Key("checkpoint_uri").Str(s.checkpoint_uri).Key("max_restarts").Int(s.max_restarts);
  w.Key("time_limit_s").Int(s.time_limit_s).Key("grace_period_s").Int(s.grace_period_s);
  w.Key("gpu_model").Str(s.gpu_model).Key("min_gpu_memory_mb").Int(s.min_gpu_memory_mb);
  w.Key("cpus_per_node").Int(s.cpus_per_node).Key("memory_mb_per_node").Int(s.memory_mb_per_node);
  w.Key("interactive").Bool(s.interactive).Key("idle_timeout_s").Int(s.idle_timeout_s);
  w.Key("hang_timeout_s").Int(s.hang_timeout_s);
  w.Key("move_off_stragglers").Bool(s.move_off_stragglers);
  w.Close('}');
}

void WriteTelemetry(const TelemetryFigures& t, JsonWriter& w) {
  w.Open('{');
  w.Key("step").Int(t.step).Key("loss").Real(t.loss).Key("tokens_per_s").Real(t.tokens_per_s);
  w.Key("step_ms").Real(t.step_ms).Key("comm_wait_share").Real(t.comm_wait_share);
  w.Key("loss_scale").Real(t.loss_scale).Key("skipped_steps").Int(t.skipped_steps);
  w.Key("ckpt_stall_ms").Real(t.ckpt_stall_ms).Key("unix_ms").Int(t.unix_ms);
  w.Key("attempt").Int(t.attempt).Key("total_steps").Int(t.total_steps);
  w.Close('}');
}

JobSpec SpecFromJson(const json& j) {
  JobSpec s;
  Get(j, "name", &s.name);
  Get(j, "tenant", &s.tenant);
  Get(j, "priority", &s.priority);
  Get(j, "preemptible", &s.preemptible);
  Get(j, "nodes", &s.nodes);
  Get(j, "gpus_per_node", &s.gpus_per_node);
  Get(j, "command", &s.command);
  Get(j, "env", &s.env);
  Get(j, "checkpoint_uri", &s.checkpoint_uri);
  Get(j, "max_restarts", &s.max_restarts);
  Get(j, "time_limit_s", &s.time_limit_s);
  Get(j, "grace_period_s", &s.grace_period_s);
  Get(j, "gpu_model", &s.gpu_model);
  Get(j, "min_gpu_memory_mb", &s.min_gpu_memory_mb);
  Get(j, "cpus_per_node", &s.cpus_per_node);
  Get(j, "memory_mb_per_node", &s.memory_mb_per_node);
  Get(j, "interactive", &s.interactive);
  Get(j, "idle_timeout_s", &s.idle_timeout_s);
  Get(j, "hang_timeout_s", &s.hang_timeout_s);
  Get(j, "move_off_stragglers", &s.move_off_stragglers);
  return s;
}

TelemetryFigures TelemetryFromJson(const json& j) {
  TelemetryFigures t;
  Get(j, "step", &t.step);
  Get(j, "loss", &t.loss);
  Get(j, "tokens_per_s", &t.tokens_per_s);
  Get(j, "step_ms", &t.step_ms);
  Get(j, "comm_wait_share", &t.comm_wait_share);
  Get(j, "loss_scale", &t.loss_scale);
  Get(j, "skipped_steps", &t.skipped_steps);
  Get(j, "ckpt_stall_ms", &t.ckpt_stall_ms);
  Get(j, "unix_ms", &t.unix_ms);
  Get(j, "attempt", &t.attempt);
  Get(j, "total_steps", &t.total_steps);
  return t;
}

absl::Status SpansFromJson(const json& j, std::vector<AttemptSpan>* out) {
  if (!j.is_array()) return absl::DataLossError("job record: attempt_spans is not a list");
  out->clear();
  for (size_t i = 0; i < j.size(); ++i) {
    const json& e = j[i];
    if (!e.is_array() || e.size() != 4 || !e[0].is_number() || !e[1].is_number() || !e[2].is_string() ||
        !e[3].is_string()) {
      return absl::DataLossError(absl::StrCat("job record: bad attempt_spans entry ", i));
    }
    out->push_back({e[0].get<double>(), e[1].get<double>(), e[2].get<std::string>(), e[3].get<std::string>()});
  }
  return absl::OkStatus();
}

}  // namespace

// Written on every commit of a changed job: straight to text (JsonWriter),
// read back with nlohmann::json.
std::string EncodeJob(const JobRecord& job) {
  std::string out;
  out.reserve(1024);
  JsonWriter w(&out);
  w.Open('{');
  w.Key("id").Str(job.id).Key("seq").Int(job.seq);
  w.Key("spec");
  WriteSpec(job.spec, w);
  w.Key("state").Int(static_cast<int>(job.state)).Key("attempt").Int(job.attempt);
  w.Key("allocation").Open('[');
  for (const RankPlacement& p : job.allocation) {
    w.Open('{').Key("rank").Int(p.rank).Key("node").Str(p.node);
    w.Key("local_rank").Int(p.local_rank).Key("node_rank").Int(p.node_rank);
    w.Key("gpu_ids").Ints(p.gpu_ids).Close('}');
  }
  w.Close(']').Key("allocated").Bool(job.allocated);
  w.Key("ranks").Open('[');
  for (const RankStatus& r : job.ranks) {
    w.Open('{').Key("rank").Int(r.rank).Key("started").Bool(r.started);
    w.Key("exited").Bool(r.exited).Key("exit_code").Int(r.exit_code);
    w.Key("signal").Int(r.signal).Key("message").Str(r.message).Close('}');
  }
  w.Close(']').Key("reason").Str(job.reason);
  w.Key("submit_time_unix").Int(job.submit_time_unix);
  w.Key("start_time_unix").Int(job.start_time_unix);
  w.Key("end_time_unix").Int(job.end_time_unix);
  w.Key("restarts").Int(job.restarts).Key("committed_step").Int(job.committed_step);
  w.Key("master_addr").Str(job.master_addr).Key("master_port").Int(job.master_port);
  w.Key("stopping").Bool(job.stopping);
  w.Key("stop_outcome").Int(static_cast<int>(job.stop_outcome));
  w.Key("stop_reason").Str(job.stop_reason).Key("preempted").Bool(job.preempted);
  w.Key("stop_kill_after_ms").Int(job.stop_kill_after_ms);
  w.Key("preempt_deadline_unix").Real(job.preempt_deadline_unix);
  w.Key("last_checkpoint_unix").Real(job.last_checkpoint_unix);
  w.Key("usage").Open('[');  // [[start, end, gpus], ...]
  for (const UsageInterval& u : job.usage) w.Open('[').Real(u.start).Real(u.end).Int(u.gpus).Close(']');
  w.Close(']').Key("attempt_nodes").Open('[');
  for (const std::vector<std::string>& nodes : job.attempt_nodes) w.Strs(nodes);
  w.Close(']').Key("attempt_spans").Open('[');  // [[start, end, outcome, reason], ...]
  for (const AttemptSpan& a : job.attempt_spans) {
    w.Open('[').Real(a.start).Real(a.end).Str(a.outcome).Str(a.reason).Close(']');
  }
  w.Close(']').Key("last_active_unix").Real(job.last_active_unix);
  w.Key("idle_warned").Bool(job.idle_warned);
  w.Key("telemetry");
  WriteTelemetry(job.last_telemetry, w);
  w.Key("idempotency_key").Str(job.idempotency_key).Key("avoid_nodes").Strs(job.avoid_nodes);
  w.Key("hang").Open('{').Key("attempt").Int(job.hang.attempt).Key("rank").Int(job.hang.rank);
  w.Key("node").Str(job.hang.node).Key("reason").Str(job.hang.reason);
  w.Key("detected_unix").Int(job.hang.detected_unix).Key("stalled_s").Real(job.hang.stalled_s);
  w.Close('}').Close('}');
  return out;
}

absl::StatusOr<JobRecord> DecodeJob(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return absl::DataLossError("job record is not JSON");
  try {
    JobRecord job;
    Get(j, "id", &job.id);
    Get(j, "seq", &job.seq);
    if (j.contains("spec")) job.spec = SpecFromJson(j["spec"]);
    job.state = GetEnum(j, "state", JobState::kPending, JobState::kCancelled);
    job.stop_outcome = GetEnum(j, "stop_outcome", JobState::kFailed, JobState::kCancelled);
    Get(j, "attempt", &job.attempt);
    for (const json& a : j.value("allocation", json::array())) {
      RankPlacement p;
      Get(a, "rank", &p.rank);
      Get(a, "node", &p.node);
      Get(a, "local_rank", &p.local_rank);
      Get(a, "node_rank", &p.node_rank);
      GetInts(a, "gpu_ids", &p.gpu_ids);
      job.allocation.push_back(std::move(p));
    }
    for (const json& r : j.value("ranks", json::array())) {
      RankStatus s;
      Get(r, "rank", &s.rank);
      Get(r, "started", &s.started);
      Get(r, "exited", &s.exited);
      Get(r, "exit_code", &s.exit_code);
      Get(r, "signal", &s.signal);
      Get(r, "message", &s.message);
      job.ranks.push_back(s);
    }
    Get(j, "reason", &job.reason);
    Get(j, "submit_time_unix", &job.submit_time_unix);
    Get(j, "start_time_unix", &job.start_time_unix);
    Get(j, "end_time_unix", &job.end_time_unix);
    Get(j, "restarts", &job.restarts);
    Get(j, "committed_step", &job.committed_step);
    Get(j, "idempotency_key", &job.idempotency_key);
    Get(j, "avoid_nodes", &job.avoid_nodes);
    if (j.contains("hang")) {
      const json& h = j["hang"];
      Get(h, "attempt", &job.hang.attempt);
      Get(h, "rank", &job.hang.rank);
      Get(h, "node", &job.hang.node);
      Get(h, "reason", &job.hang.reason);
      Get(h, "detected_unix", &job.hang.detected_unix);
      Get(h, "stalled_s", &job.hang.stalled_s);
    }
    Get(j, "master_addr", &job.master_addr);
    Get(j, "master_port", &job.master_port);
    Get(j, "allocated", &job.allocated);
    Get(j, "stopping", &job.stopping);
    Get(j, "stop_reason", &job.stop_reason);
    Get(j, "preempted", &job.preempted);
    Get(j, "stop_kill_after_ms", &job.stop_kill_after_ms);
    Get(j, "preempt_deadline_unix", &job.preempt_deadline_unix);
    Get(j, "last_checkpoint_unix", &job.last_checkpoint_unix);
    for (const json& u : j.value("usage", json::array())) {
      if (!u.is_array() || u.size() != 3) return absl::DataLossError("job record: bad usage entry");
      UsageInterval interval;
      json fields{{"start", u[0]}, {"end", u[1]}, {"gpus", u[2]}};
      Get(fields, "start", &interval.start);
      Get(fields, "end", &interval.end);
      Get(fields, "gpus", &interval.gpus);
      job.usage.push_back(interval);
    }
    Get(j, "attempt_nodes", &job.attempt_nodes);
    if (j.contains("attempt_spans")) {
      absl::Status s = SpansFromJson(j["attempt_spans"], &job.attempt_spans);
      if (!s.ok()) return s;
    }
    Get(j, "last_active_unix", &job.last_active_unix);
    Get(j, "idle_warned", &job.idle_warned);
    if (j.contains("telemetry")) job.last_telemetry = TelemetryFromJson(j["telemetry"]);
    if (job.ranks.size() != job.allocation.size()) {
      return absl::DataLossError(absl::StrCat("job ", job.id, ": ranks and allocation disagree"));
    }
    for (size_t i = 0; i < job.allocation.size(); ++i) {
      if (job.allocation[i].rank != static_cast<int32_t>(i) || job.ranks[i].rank != static_cast<int32_t>(i)) {
        return absl::DataLossError(absl::StrCat("job ", job.id, ": ranks are not numbered 0.."));
      }
    }
    return job;
  } catch (const json::exception& e) {
    return absl::DataLossError(absl::StrCat("job record: ", e.what()));
  } catch (const BadField& e) {
    return absl::DataLossError(absl::StrCat("job record: ", e.what()));
  }
}

std::string EncodeNode(const NodeRecord& n) {
  std::string out;
  JsonWriter w(&out);
  w.Open('{').Key("name").Str(n.name).Key("agent_address").Str(n.agent_address);
  w.Key("host").Str(n.host).Key("gpus").Int(n.inventory.gpus);
  w.Key("gpu_model").Str(n.inventory.gpu_model).Key("gpu_memory_mb").Int(n.inventory.gpu_memory_mb);
  w.Key("cpus").Int(n.inventory.cpus).Key("memory_mb").Int(n.inventory.memory_mb);
  w.Key("labels").StrMap(n.inventory.labels).Key("state").Int(static_cast<int>(n.state));
  w.Key("last_heartbeat_unix").Int(n.last_heartbeat_unix).Key("reason").Str(n.reason);
  w.Key("drain").Bool(n.drain).Key("unsandboxed").Bool(n.unsandboxed).Close('}');
  return out;
}

absl::StatusOr<NodeRecord> DecodeNode(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return absl::DataLossError("node record is not JSON");
  try {
    NodeRecord n;
    Get(j, "name", &n.name);
    Get(j, "agent_address", &n.agent_address);
    Get(j, "host", &n.host);
    Get(j, "gpus", &n.inventory.gpus);
    Get(j, "gpu_model", &n.inventory.gpu_model);
    Get(j, "gpu_memory_mb", &n.inventory.gpu_memory_mb);
    Get(j, "cpus", &n.inventory.cpus);
    Get(j, "memory_mb", &n.inventory.memory_mb);
    Get(j, "labels", &n.inventory.labels);
    n.state = GetEnum(j, "state", NodeState::kUp, NodeState::kUnknown);
    Get(j, "last_heartbeat_unix", &n.last_heartbeat_unix);
    Get(j, "reason", &n.reason);
    Get(j, "drain", &n.drain);
    Get(j, "unsandboxed", &n.unsandboxed);
    return n;
  } catch (const json::exception& e) {
    return absl::DataLossError(absl::StrCat("node record: ", e.what()));
  } catch (const BadField& e) {
    return absl::DataLossError(absl::StrCat("node record: ", e.what()));
  }
}

}  // namespace athanor::coord
