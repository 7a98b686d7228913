// FakeStore: the Store in memory, for tests of what commits through it. Its
// records live in a FakeStore::Data that the test shares, so they outlive the
// store (as a database outlives the process that wrote it) and a second
// FakeStore over the same Data "reopens" them.
//
// Thread-safe (Data has its own mutex): a test may read while a committer
// thread writes. `fail_commits` makes every Commit() fail with Unavailable.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/store/store.h"

namespace athanor::coord {

class FakeStore final : public Store {
 public:
  struct Data {
    absl::Mutex mu;
    std::map<int64_t, JobRecord> jobs ABSL_GUARDED_BY(mu);  // by seq
    std::map<std::string, NodeRecord> nodes ABSL_GUARDED_BY(mu);
    std::map<std::string, int32_t> quotas ABSL_GUARDED_BY(mu);
    std::map<std::pair<std::string, int64_t>, billing::Price> prices ABSL_GUARDED_BY(mu);
    std::map<std::string, billing::Plan> plans ABSL_GUARDED_BY(mu);
    std::map<int64_t, billing::LedgerEntry> ledger ABSL_GUARDED_BY(mu);
    std::map<std::pair<std::string, std::string>, rpc::Image> images ABSL_GUARDED_BY(mu);
    std::map<std::pair<std::string, std::string>, rpc::Volume> volumes ABSL_GUARDED_BY(mu);
    std::map<std::string, rpc::InstanceSnapshot> snapshots ABSL_GUARDED_BY(mu);
    int commits ABSL_GUARDED_BY(mu) = 0;
    bool fail_commits ABSL_GUARDED_BY(mu) = false;
  };

  explicit FakeStore(std::shared_ptr<Data> data = std::make_shared<Data>()) : data_(std::move(data)) {}

  absl::Status Commit(const Changes& changes) override {
    absl::MutexLock lock(&data_->mu);
    if (data_->fail_commits) return absl::UnavailableError("FakeStore: commits fail");
    for (const billing::LedgerEntry& e : changes.ledger) {
      if (data_->ledger.count(e.id())) {
        return absl::InternalError(absl::StrCat("FakeStore: ledger entry ", e.id(), " exists"));
      }
    }
    for (const JobRecord& j : changes.jobs) data_->jobs[j.seq] = j;
    for (const NodeRecord& n : changes.nodes) data_->nodes[n.name] = n;
    for (const auto& [tenant, gpus] : changes.quotas) {
      if (gpus < 0) {
        data_->quotas.erase(tenant);
      } else {
        data_->quotas[tenant] = gpus;
      }
    }
    for (const billing::Price& p : changes.prices) data_->prices[{p.gpu_model(), p.effective_unix_ms()}] = p;
    for (const billing::Plan& p : changes.plans) data_->plans[p.tenant()] = p;
    for (const billing::LedgerEntry& e : changes.ledger) data_->ledger[e.id()] = e;
    for (const ImageChange& c : changes.images) {
      if (c.removed) {
        data_->images.erase({c.image.tenant(), c.image.name()});
      } else {
        data_->images[{c.image.tenant(), c.image.name()}] = c.image;
      }
    }
    for (const VolumeChange& c : changes.volumes) {
      if (c.removed) {
        data_->volumes.erase({c.volume.tenant(), c.volume.name()});
      } else {
        data_->volumes[{c.volume.tenant(), c.volume.name()}] = c.volume;
      }
    }
    for (const SnapshotChange& c : changes.snapshots) {
      if (c.removed) {
        data_->snapshots.erase(c.snapshot.id());
      } else {
        data_->snapshots[c.snapshot.id()] = c.snapshot;
      }
    }
    ++data_->commits;
    return absl::OkStatus();
  }

  absl::StatusOr<Contents> LoadAll() override {
    absl::MutexLock lock(&data_->mu);
    Contents out;
    for (const auto& [seq, j] : data_->jobs) out.jobs.push_back(j);
    for (const auto& [name, n] : data_->nodes) out.nodes.push_back(n);
    out.quotas = data_->quotas;
    for (const auto& [key, p] : data_->prices) out.prices.push_back(p);
    for (const auto& [tenant, p] : data_->plans) out.plans.push_back(p);
    for (const auto& [id, e] : data_->ledger) out.ledger.push_back(e);
    for (const auto& [key, i] : data_->images) out.images.push_back(i);
    for (const auto& [key, v] : data_->volumes) out.volumes.push_back(v);
    for (const auto& [id, s] : data_->snapshots) out.snapshots.push_back(s);
    return out;
  }

  StoreLog log() const override { return StoreLog(); }

  const std::shared_ptr<Data>& data() const { return data_; }

 private:
  const std::shared_ptr<Data> data_;
};

}  // namespace athanor::coord
