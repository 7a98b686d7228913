#include "worker/agent/notebook_ranks.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <unistd.h>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"
#include "common/notebook_paths.h"

namespace athanor::agent {
namespace {

constexpr int kProbeTimeoutMs = 2000;

// The first child of `pid` (a sandboxed rank under athanor-sandbox-exec), or 0.
pid_t FirstChild(pid_t pid) {
  std::string path = absl::StrCat("/proc/", pid, "/task/", pid, "/children");
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[256];
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return 0;
  for (absl::string_view word : absl::StrSplit(absl::string_view(buf, static_cast<size_t>(n)), ' ',
                                               absl::SkipWhitespace())) {
    int child = 0;
    if (absl::SimpleAtoi(word, &child) && child > 1) return child;
  }
  return 0;
}

}  // namespace

NotebookRanks::NotebookRanks(bool sandboxed, absl::Duration probe_interval)
    : sandboxed_(sandboxed), probe_interval_(probe_interval) {
  prober_ = std::thread([this] { ProbeLoop(); });
}

NotebookRanks::~NotebookRanks() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  prober_.join();
}

std::string NotebookRanks::TokenFor(const RankKey& key) {
  absl::MutexLock lock(&mu_);
  Rank& r = ranks_[key];
  if (r.token.empty()) {
    unsigned char bytes[32];
    if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
      ATHANOR_LOG(ERROR) << "notebook of job " << key.job_id << " rank " << key.rank
                         << ": OpenSSL's RAND_bytes failed; the notebook gets no token";
      return "";
    }
    r.token = absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(bytes), sizeof(bytes)));
  }
  return r.token;
}

void NotebookRanks::Retain(const std::set<RankKey>& keep) {
  absl::MutexLock lock(&mu_);
  for (auto it = ranks_.begin(); it != ranks_.end();) {
    it = keep.count(it->first) ? std::next(it) : ranks_.erase(it);
  }
}

void NotebookRanks::NoteReports(const std::vector<RankStatusReport>& reports) {
  absl::MutexLock lock(&mu_);
  for (const RankStatusReport& rep : reports) {
    auto it = ranks_.find(rep.key);
    if (it == ranks_.end()) continue;
    it->second.pid = rep.phase == RankPhase::kRunning ? rep.pid : 0;
  }
}

absl::StatusOr<NotebookRanks::Endpoint> NotebookRanks::EndpointLocked(const RankKey& key,
                                                                      const Rank& r) const {
  if (r.pid <= 0) {
    return absl::FailedPreconditionError(absl::StrCat("job ", key.job_id, " rank ", key.rank,
                                                      ": the notebook is not running here (yet, or any more)"));
  }
  if (r.token.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("job ", key.job_id, " rank ", key.rank,
                                                      ": the notebook has no token"));
  }
  pid_t server = sandboxed_ ? FirstChild(r.pid) : r.pid;
  if (server <= 0) {
    return absl::FailedPreconditionError(absl::StrCat("job ", key.job_id, " rank ", key.rank,
                                                      ": the notebook's process has not started yet"));
  }
  return Endpoint{absl::StrCat("/proc/", server, "/root", NotebookSocketPath(key.job_id)), r.token};
}

absl::StatusOr<NotebookRanks::Endpoint> NotebookRanks::Find(const RankKey& key) const {
  absl::MutexLock lock(&mu_);
  auto it = ranks_.find(key);
  if (it == ranks_.end()) {
    return absl::NotFoundError(absl::StrCat("job ", key.job_id, " attempt ", key.attempt, " rank ",
                                            key.rank, ": no notebook rank on this node"));
  }
  return EndpointLocked(key, it->second);
}

void NotebookRanks::AddKernelActivity(google::protobuf::RepeatedPtrField<rpc::RankReport>* reports) const {
  absl::MutexLock lock(&mu_);
  for (rpc::RankReport& rep : *reports) {
    auto it = ranks_.find({rep.job_id(), rep.attempt(), rep.rank()});
    if (it == ranks_.end() || !it->second.probed) continue;
    rpc::RankActivity* a = rep.mutable_activity();
    a->set_measured(true);
    a->set_kernels_busy(it->second.kernels.busy);
    a->set_kernel_last_activity_unix(it->second.kernels.last_activity_unix);
  }
}

void NotebookRanks::ProbeLoop() {
  mu_.Lock();
  while (!stop_) {
    std::vector<std::pair<RankKey, Endpoint>> targets;
    for (const auto& [key, r] : ranks_) {
      absl::StatusOr<Endpoint> e = EndpointLocked(key, r);
      if (e.ok()) targets.emplace_back(key, std::move(*e));
    }
    mu_.Unlock();
    std::vector<std::pair<RankKey, absl::StatusOr<KernelActivity>>> results;
    for (const auto& [key, e] : targets) {
      results.emplace_back(key, ProbeKernels(e.socket_path, NotebookBaseUrl(key.job_id), e.token,
                                             kProbeTimeoutMs));
    }
    mu_.Lock();
    for (auto& [key, result] : results) {
      auto it = ranks_.find(key);
      if (it == ranks_.end()) continue;
      // A server still starting does not answer yet: no figure, not an error.
      if (!result.ok()) {
        ATHANOR_LOG(DEBUG) << "notebook of job " << key.job_id << " rank " << key.rank << ": " << result.status();
        continue;
      }
      it->second.probed = true;
      it->second.kernels = *result;
    }
    mu_.AwaitWithTimeout(absl::Condition(&stop_), probe_interval_);
  }
  mu_.Unlock();
}

}  // namespace athanor::agent
