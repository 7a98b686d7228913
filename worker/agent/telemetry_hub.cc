#include "worker/agent/telemetry_hub.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace athanor::agent {
namespace {

using json = nlohmann::json;

bool SafeName(const std::string& s) {
  if (s.empty() || s.size() > 64 || s[0] == '.') return false;
  for (char c : s) {
    if (!isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A finite number field, if present; false when present but not a number.
bool Number(const json& j, const char* key, double* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return true;
  if (!it->is_number()) return false;
  double v = it->get<double>();
  if (!std::isfinite(v)) return false;
  *out = v;
  return true;
}

}  // namespace

TelemetryHub::TelemetryHub(std::string work_dir) : work_dir_(std::move(work_dir)) {
  if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    ATHANOR_LOG(ERROR) << "telemetry: pipe2: " << strerror(errno) << "; telemetry is off";
    return;
  }
  thread_ = std::thread([this] { Loop(); });
}

TelemetryHub::~TelemetryHub() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (wake_[1] >= 0) (void)!write(wake_[1], "x", 1);
  if (thread_.joinable()) thread_.join();
  Retain({});
  for (int fd : wake_) {
    if (fd >= 0) close(fd);
  }
}

bool TelemetryHub::Parse(const char* data, size_t size, int32_t* rank, StepSample* out, bool* skipped,
                         std::string* why) {
  *out = StepSample{};
  if (size > kMaxMessage) {
    *why = "message over 4 KiB";
    return false;
  }
  json j = json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    *why = "not a JSON object";
    return false;
  }
  auto step = j.find("step");
  if (step == j.end() || !step->is_number_integer() || step->get<int64_t>() < 0) {
    *why = "step: a non-negative integer is required";
    return false;
  }
  out->step = step->get<int64_t>();
  auto r = j.find("rank");
  *rank = 0;
  if (r != j.end()) {
    if (!r->is_number_integer() || r->get<int64_t>() < 0 || r->get<int64_t>() > 1 << 20) {
      *why = "rank: not a rank number";
      return false;
    }
    *rank = static_cast<int32_t>(r->get<int64_t>());
  }
  if (!j.contains("loss")) {
    *why = "loss: required";
    return false;
  }
  double comm_wait_ms = -1, skipped_steps = -1, total_steps = 0, ckpt_step = -1;
  if (!Number(j, "loss", &out->loss) || !Number(j, "tokens_per_s", &out->tokens_per_s) ||
      !Number(j, "step_ms", &out->step_ms) || !Number(j, "comm_wait_ms", &comm_wait_ms) ||
      !Number(j, "comm_wait_share", &out->comm_wait_share) || !Number(j, "loss_scale", &out->loss_scale) ||
      !Number(j, "ckpt_stall_ms", &out->ckpt_stall_ms) || !Number(j, "skipped_steps", &skipped_steps) ||
      !Number(j, "total_steps", &total_steps) || !Number(j, "ckpt_step", &ckpt_step) ||
      !Number(j, "ckpt_bytes", &out->ckpt_bytes) || !Number(j, "ckpt_upload_ms", &out->ckpt_upload_ms)) {
    *why = "a figure is not a finite number";
    return false;
  }
  if (ckpt_step > 9e18 || out->ckpt_bytes > 1e18 || out->ckpt_upload_ms > 1e12) {
    *why = "a checkpoint figure is out of range";
    return false;
  }
  if (skipped_steps > 9e18) {  // cast to int64 below
    *why = "skipped_steps: out of range";
    return false;
  }
  out->ckpt_step = ckpt_step >= 0 ? static_cast<int64_t>(ckpt_step) : -1;
  if (comm_wait_ms >= 0 && out->step_ms > 0) out->comm_wait_share = std::min(1.0, comm_wait_ms / out->step_ms);
  out->total_steps = total_steps > 0 && total_steps < 9e18 ? static_cast<int64_t>(total_steps) : 0;
  out->skipped_steps = skipped_steps >= 0 ? static_cast<int64_t>(skipped_steps) : -1;
  auto sk = j.find("skipped");
  *skipped = sk != j.end() && sk->is_boolean() && sk->get<bool>();
  return true;
}

absl::StatusOr<std::string> TelemetryHub::SocketFor(const std::string& job_id, int32_t attempt) {
  if (!SafeName(job_id)) {
    return absl::InvalidArgumentError(absl::StrCat("job id '", job_id.substr(0, 64), "' is not a safe file name"));
  }
  absl::MutexLock lock(&mu_);
  auto key = std::make_pair(job_id, attempt);
  auto it = channels_.find(key);
  if (it != channels_.end()) return it->second.path;
  std::string dir = absl::StrCat(work_dir_, "/jobs/", job_id, "/telemetry");
  std::string path = absl::StrCat(dir, "/attempt-", attempt, ".sock");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("telemetry socket path '", path, "' is longer than ",
                                                   sizeof(addr.sun_path) - 1, " bytes"));
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  chmod(dir.c_str(), 0700);  // the sandbox hands it to the tenant's uid
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  unlink(path.c_str());
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int e = errno;
    close(fd);
    return absl::InternalError(absl::StrCat("bind ", path, ": ", strerror(e)));
  }
  // Writable by the rank's uid; the folder (0700, the tenant's) keeps others out.
  chmod(path.c_str(), 0666);
  Channel& c = channels_[key];
  c.fd = fd;
  c.path = path;
  if (wake_[1] >= 0) (void)!write(wake_[1], "x", 1);
  return path;
}

void TelemetryHub::Retain(const std::set<std::pair<std::string, int32_t>>& keep) {
  absl::MutexLock lock(&mu_);
  for (auto it = channels_.begin(); it != channels_.end();) {
    if (keep.count(it->first)) {
      ++it;
      continue;
    }
    close(it->second.fd);
    unlink(it->second.path.c_str());
    it = channels_.erase(it);
  }
  if (wake_[1] >= 0) (void)!write(wake_[1], "x", 1);
}

std::vector<JobSamples> TelemetryHub::Take() {
  absl::MutexLock lock(&mu_);
  std::vector<JobSamples> out;
  for (auto& [key, c] : channels_) {
    if (c.pending.empty() && c.ranks.empty()) continue;
    JobSamples s;
    s.job_id = key.first;
    s.attempt = key.second;
    s.samples = std::move(c.pending);
    s.ranks_reporting = static_cast<int32_t>(c.ranks.size());
    c.pending.clear();
    c.ranks.clear();
    out.push_back(std::move(s));
  }
  return out;
}

std::map<std::pair<std::string, int32_t>, StepSample> TelemetryHub::Latest() const {
  absl::MutexLock lock(&mu_);
  std::map<std::pair<std::string, int32_t>, StepSample> out;
  for (const auto& [key, c] : channels_) {
    if (c.has_latest) out[key] = c.latest;
  }
  return out;
}

UploadFigures TelemetryHub::rank_uploads() const {
  absl::MutexLock lock(&mu_);
  return rank_uploads_;
}

void TelemetryHub::Receive(const std::pair<std::string, int32_t>& key, int fd) {
  char buf[kMaxMessage + 1];
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC);
    if (n < 0) return;  // EAGAIN: drained (or the socket went away)
    int32_t rank = 0;
    StepSample s;
    bool skipped = false;
    std::string why;
    if (static_cast<size_t>(n) > kMaxMessage || !Parse(buf, static_cast<size_t>(n), &rank, &s, &skipped, &why)) {
      if (dropped_.fetch_add(1) % 1000 == 0) {
        ATHANOR_LOG(WARNING) << "telemetry of job " << key.first << ": dropped a message: "
                             << (why.empty() ? "over 4 KiB" : why);
      }
      continue;
    }
    s.unix_ms = NowMs();
    absl::MutexLock lock(&mu_);
    auto it = channels_.find(key);
    if (it == channels_.end() || it->second.fd != fd) return;
    Channel& c = it->second;
    c.ranks.insert(rank);
    if (s.ckpt_step >= 0 && s.ckpt_bytes >= 0 && s.ckpt_upload_ms >= 0) {
      auto told = c.ckpt_told.find(rank);
      const bool fresh = told == c.ckpt_told.end() ? c.ckpt_told.size() < kMaxCheckpointRanks
                                                    : s.ckpt_step > told->second;
      if (fresh) {
        c.ckpt_told[rank] = s.ckpt_step;
        ++rank_uploads_.uploads;
        rank_uploads_.bytes += s.ckpt_bytes;
        rank_uploads_.seconds += s.ckpt_upload_ms / 1e3;
      }
    }
    if (rank != 0) continue;
    if (skipped) ++c.skipped;
    if (s.skipped_steps < 0) s.skipped_steps = c.skipped;
    if (c.pending.size() >= kMaxPending) {
      std::vector<StepSample> kept;
      for (size_t i = 1; i < c.pending.size(); i += 2) kept.push_back(c.pending[i]);
      c.pending = std::move(kept);
    }
    c.pending.push_back(s);
    c.latest = s;
    c.has_latest = true;
  }
}

void TelemetryHub::Loop() {
  for (;;) {
    std::vector<pollfd> fds = {{wake_[0], POLLIN, 0}};
    std::vector<std::pair<std::string, int32_t>> keys;
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
      for (const auto& [key, c] : channels_) {
        fds.push_back({c.fd, POLLIN, 0});
        keys.push_back(key);
      }
    }
    if (poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) {
      ATHANOR_LOG(ERROR) << "telemetry: poll: " << strerror(errno);
      return;
    }
    if (fds[0].revents != 0) {
      char drain[64];
      while (read(wake_[0], drain, sizeof(drain)) > 0) {
      }
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents & POLLIN) Receive(keys[i - 1], fds[i].fd);
    }
  }
}

}  // namespace athanor::agent
