#include "worker/agent/volume_sync.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "storage/archive.h"
#include "worker/agent/rank_log.h"

namespace athanor::agent {
namespace fs = std::filesystem;

namespace {

std::string AttemptVolumes(const std::string& work_dir, const std::string& job_id, int32_t attempt) {
  return absl::StrCat(work_dir, "/jobs/", job_id, "/attempt-", attempt, "/volumes");
}

}  // namespace

std::string VolumeDir(const std::string& work_dir, const std::string& job_id, int32_t attempt,
                      const std::string& name) {
  return absl::StrCat(AttemptVolumes(work_dir, job_id, attempt), "/", name);
}

VolumeSync::VolumeSync(std::string work_dir, std::unique_ptr<VolumeTransport> transport,
                       std::function<uid_t(const std::string&)> uid_of)
    : work_dir_(std::move(work_dir)), transport_(std::move(transport)), uid_of_(std::move(uid_of)) {
  thread_ = std::thread([this] { Loop(); });
}

VolumeSync::~VolumeSync() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void VolumeSync::SetOnReady(std::function<void()> on_ready) {
  absl::MutexLock call(&call_mu_);
  absl::MutexLock lock(&mu_);
  on_ready_ = std::move(on_ready);
}

VolumeSync::Lookup VolumeSync::Acquire(const RankTarget& target) {
  absl::MutexLock lock(&mu_);
  const AttemptKey key{target.key.job_id, target.key.attempt};
  auto it = attempts_.find(key);
  if (it == attempts_.end()) {
    Attempt& a = attempts_[key];
    a.tenant = target.tenant.empty() ? "default" : target.tenant;
    a.volumes = target.volumes;
    queue_.push_back({key, /*store=*/false});
    return {Lookup::kPending, ""};
  }
  const Attempt& a = it->second;
  if (a.syncing) {
    return {Lookup::kFailed, "the attempt's volumes on this node are already being synced up (its ranks here ended)"};
  }
  return {a.state, a.error};
}

void VolumeSync::RankStarted(const RankKey& key) {
  absl::MutexLock lock(&mu_);
  auto it = attempts_.find({key.job_id, key.attempt});
  if (it == attempts_.end()) return;
  it->second.live.insert(key.rank);
  it->second.ranks.insert(key.rank);
}

void VolumeSync::RankEnded(const RankKey& key) {
  absl::MutexLock lock(&mu_);
  auto it = attempts_.find({key.job_id, key.attempt});
  if (it == attempts_.end() || it->second.syncing) return;
  Attempt& a = it->second;
  a.live.erase(key.rank);
  // A failed fetch stays failed for the attempt's other ranks here (kept:
  // one small record per such attempt, until the agent restarts).
  if (!a.live.empty() || a.state != Lookup::kReady) return;
  a.syncing = true;  // the box here ended: sync up (or just clean up)
  queue_.push_back({it->first, /*store=*/true});
}

void VolumeSync::Drain() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](VolumeSync* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu_) { return s->queue_.empty() && !s->busy_; }, this));
}

void VolumeSync::Loop() {
  for (;;) {
    Task task;
    Attempt snapshot;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](VolumeSync* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu_) { return s->stop_ || !s->queue_.empty(); },
          this));
      if (stop_) return;
      task = queue_.front();
      queue_.pop_front();
      auto it = attempts_.find(task.key);
      if (it == attempts_.end()) continue;
      snapshot = it->second;
      busy_ = true;
    }
    if (task.store) {
      StoreAll(task.key, std::move(snapshot));
    } else {
      FetchAll(task.key, std::move(snapshot));
    }
    absl::MutexLock call(&call_mu_);
    std::function<void()> on_ready;
    {
      absl::MutexLock lock(&mu_);
      busy_ = false;
      if (!task.store) on_ready = on_ready_;
    }
    if (on_ready) on_ready();
  }
}

void VolumeSync::FetchAll(const AttemptKey& key, Attempt a) {
  const auto& [job, attempt] = key;
  const uid_t uid = uid_of_(a.tenant);
  std::error_code ec;
  const std::string root = AttemptVolumes(work_dir_, job, attempt);
  fs::remove_all(root, ec);  // what a killed agent left of this attempt
  fs::create_directories(root, ec);
  std::string error = ec ? absl::StrCat("cannot create ", root, ": ", ec.message()) : "";
  std::map<std::string, VolumeContent> fetched;
  for (size_t i = 0; error.empty() && i < a.volumes.size(); ++i) {
    const std::string& name = a.volumes[i].name;
    const std::string dir = VolumeDir(work_dir_, job, attempt, name);
    const std::string tar = dir + ".tar";
    absl::Status s;
    absl::StatusOr<VolumeContent> got = transport_->Fetch(job, attempt, name, tar);
    if (!got.ok()) {
      s = got.status();
    } else if (got->generation == 0) {  // empty: a folder of the tenant's
      fs::create_directory(dir, ec);
      if (ec || chown(dir.c_str(), uid, uid) != 0 || chmod(dir.c_str(), 0750) != 0) {
        s = absl::InternalError(absl::StrCat("cannot make ", dir, ec ? ": " + ec.message() : ""));
      }
    } else {
      absl::StatusOr<std::string> digest = storage::Sha256File(tar);
      if (!digest.ok()) {
        s = digest.status();
      } else if (*digest != got->digest) {
        s = absl::DataLossError(absl::StrCat("its content hashes to ", *digest, ", not ", got->digest));
      } else {
        storage::UnpackOptions options;
        options.owner_uid = uid;
        s = storage::UnpackTree(tar, dir, options);
      }
    }
    fs::remove(tar, ec);
    if (s.ok()) {
      fetched[name] = *got;
      ATHANOR_LOG(INFO) << "job " << job << " attempt " << attempt << ": volume " << name << " generation "
                        << got->generation << " synced down (" << got->size_bytes << " bytes)";
    } else {
      error = absl::StrCat("cannot fetch volume '", name, "': ", s.message());
    }
  }
  if (!error.empty()) {
    ATHANOR_LOG(WARNING) << "job " << job << " attempt " << attempt << ": " << error;
    fs::remove_all(root, ec);
  }
  absl::MutexLock lock(&mu_);
  auto it = attempts_.find(key);
  if (it == attempts_.end()) return;
  it->second.state = error.empty() ? Lookup::kReady : Lookup::kFailed;
  it->second.error = error;
  it->second.fetched = std::move(fetched);
}

void VolumeSync::StoreAll(const AttemptKey& key, Attempt a) {
  const auto& [job, attempt] = key;
  // Only an attempt whose ranks ran can have changed its copies.
  for (size_t i = 0; a.state == Lookup::kReady && !a.ranks.empty() && i < a.volumes.size(); ++i) {
    const VolumeMountTarget& v = a.volumes[i];
    if (v.read_only) continue;
    const std::string dir = VolumeDir(work_dir_, job, attempt, v.name);
    const std::string tar = dir + ".tar";
    const VolumeContent& base = a.fetched[v.name];
    absl::StatusOr<storage::PackResult> packed = storage::PackTree(dir, tar);
    absl::Status s = packed.status();
    bool unchanged = false;
    if (packed.ok()) {
      unchanged = packed->digest == base.digest || (base.generation == 0 && fs::is_empty(dir));
      if (!unchanged) {
        s = transport_->Store(job, attempt, v.name, base.generation, tar,
                              {base.generation, packed->digest, packed->bytes});
      }
    }
    if (unchanged || !s.ok()) {  // no new generation: the coordinator stops waiting for one
      if (absl::Status r = transport_->Report(job, attempt, v.name, base.generation); !r.ok()) {
        ATHANOR_LOG(WARNING) << "job " << job << " attempt " << attempt << ": volume '" << v.name
                             << "': the coordinator was not told that nothing is stored: " << r;
      }
    }
    std::error_code ec;
    fs::remove(tar, ec);
    if (!s.ok()) {
      Tell(key, a.ranks,
           absl::StrCat("volume '", v.name, "' was not synced up; it keeps its content of generation ",
                        base.generation, ": ", s.message()),
           /*warning=*/true);
    } else if (!unchanged) {
      Tell(key, a.ranks, absl::StrCat("volume '", v.name, "' synced up (", packed->bytes, " bytes)"), false);
    }
  }
  std::error_code ec;
  fs::remove_all(AttemptVolumes(work_dir_, job, attempt), ec);
  absl::MutexLock lock(&mu_);
  attempts_.erase(key);
}

void VolumeSync::Tell(const AttemptKey& key, const std::set<int32_t>& ranks, const std::string& line, bool warning) {
  if (warning) {
    ATHANOR_LOG(WARNING) << "job " << key.first << " attempt " << key.second << ": " << line;
  } else {
    ATHANOR_LOG(INFO) << "job " << key.first << " attempt " << key.second << ": " << line;
  }
  for (int32_t rank : ranks) {
    absl::Status s = AppendToRankLog(work_dir_, {key.first, key.second, rank}, absl::StrCat("athanor-agent: ", line, "\n"));
    if (!s.ok()) ATHANOR_LOG(WARNING) << "job " << key.first << " rank " << rank << ": " << s.message();
  }
}

}  // namespace athanor::agent
