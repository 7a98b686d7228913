#include "coordinator/store/etcd/etcd_store.h"

#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "common/status.h"
#include "coordinator/store/group_commit.h"
#include "coordinator/store/record_codec.h"

namespace athanor::coord::etcd {
namespace {

// A name as one segment of a key: '/' and '%' written %2F and %25, so that
// (tenant "a/b", name "c") and (tenant "a", name "b/c") are different keys.
// The rows carry the names themselves; only a quota's key is read back
// (its row is the count alone).
std::string Segment(absl::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (char c : name) {
    if (c == '/') {
      out += "%2F";
    } else if (c == '%') {
      out += "%25";
    } else {
      out += c;
    }
  }
  return out;
}

// Numbers in keys are 20 characters wide, so that keys sort as the numbers do.
std::string Number(int64_t n) { return absl::StrFormat("%020d", n); }

// Whether `c` holds for `kv` (nullptr: the key is absent), as etcd decides it:
// an absent key has version and revisions 0, and fails every value comparison.
bool Holds(const Compare& c, const KeyValue* kv) {
  if (c.target == Compare::Target::kValue) {
    if (kv == nullptr) return false;
    const int order = kv->value.compare(c.value);
    switch (c.result) {
      case Compare::Result::kEqual: return order == 0;
      case Compare::Result::kGreater: return order > 0;
      case Compare::Result::kLess: return order < 0;
      case Compare::Result::kNotEqual: return order != 0;
    }
    return false;
  }
  int64_t have = 0;
  if (kv != nullptr) {
    switch (c.target) {
      case Compare::Target::kVersion: have = kv->version; break;
      case Compare::Target::kCreateRevision: have = kv->create_revision; break;
      case Compare::Target::kModRevision: have = kv->mod_revision; break;
      case Compare::Target::kLease: have = kv->lease; break;
      case Compare::Target::kValue: break;
    }
  }
  switch (c.result) {
    case Compare::Result::kEqual: return have == c.number;
    case Compare::Result::kGreater: return have > c.number;
    case Compare::Result::kLess: return have < c.number;
    case Compare::Result::kNotEqual: return have != c.number;
  }
  return false;
}

// One Commit's keys: the last write of each (nullopt: a deletion), and the
// ledger entries, which are only ever created.
struct Writes {
  std::map<std::string, std::optional<std::string>> rows;
  std::vector<std::pair<std::string, std::string>> ledger;  // key, row
};

absl::StatusOr<Writes> PlanWrites(const std::string& p, const Changes& changes) {
  Writes w;
  // As SqliteStore's INSERT OR REPLACE and DELETE, in the order given: a later
  // write of a key replaces an earlier one of the same batch.
  for (const JobRecord& job : changes.jobs) w.rows[absl::StrCat(p, "/jobs/", Number(job.seq))] = EncodeJob(job);
  for (const NodeRecord& node : changes.nodes) w.rows[absl::StrCat(p, "/nodes/", Segment(node.name))] = EncodeNode(node);
  // A negative quota is stored as it is, as SqliteStore does: it reads back
  // as "removed" (Store::Contents).
  for (const auto& [tenant, gpus] : changes.quotas) w.rows[absl::StrCat(p, "/quotas/", Segment(tenant))] = absl::StrCat(gpus);
  for (const billing::Price& price : changes.prices) {
    w.rows[absl::StrCat(p, "/prices/", Segment(price.gpu_model()), "/", Number(price.effective_unix_ms()))] =
        EncodeBillingRow(price);
  }
  for (const billing::Plan& plan : changes.plans) {
    w.rows[absl::StrCat(p, "/plans/", Segment(plan.tenant()))] = EncodeBillingRow(plan);
  }
  for (const ImageChange& c : changes.images) {
    const std::string key = absl::StrCat(p, "/images/", Segment(c.image.tenant()), "/", Segment(c.image.name()));
    w.rows[key] = c.removed ? std::nullopt : std::optional<std::string>(EncodeBillingRow(c.image));
  }
  for (const VolumeChange& c : changes.volumes) {
    rpc::Volume row = c.volume;
    row.clear_used_by();  // a view, never stored
    const std::string key = absl::StrCat(p, "/volumes/", Segment(row.tenant()), "/", Segment(row.name()));
    w.rows[key] = c.removed ? std::nullopt : std::optional<std::string>(EncodeBillingRow(row));
  }
  for (const SnapshotChange& c : changes.snapshots) {
    const std::string key = absl::StrCat(p, "/snapshots/", Segment(c.snapshot.id()));
    w.rows[key] = c.removed ? std::nullopt : std::optional<std::string>(EncodeBillingRow(c.snapshot));
  }
  std::set<int64_t> ids;
  for (const billing::LedgerEntry& entry : changes.ledger) {
    // The ledger is append-only: as SqliteStore's primary key, a repeated id
    // fails the whole commit.
    if (!ids.insert(entry.id()).second) {
      return absl::InternalError(absl::StrCat("etcd store: ledger entry ", entry.id(), " twice in one batch"));
    }
    w.ledger.emplace_back(absl::StrCat(p, "/ledger/", Number(entry.id())), EncodeBillingRow(entry));
  }
  return w;
}

}  // namespace

EtcdStore::EtcdStore(EtcdClient* client, Options options) : client_(client), options_(std::move(options)) {}

EtcdStore::~EtcdStore() = default;

absl::Status EtcdStore::Commit(const Changes& changes) {
  if (changes.empty()) return absl::OkStatus();
  const size_t records = RecordCount(changes);
  if (options_.max_txn_ops < 2 || records > static_cast<size_t>(max_batch_records())) {
    return absl::InvalidArgumentError(absl::StrCat("etcd store: a batch of ", records, " records, over the ",
                                                   max_batch_records(), " one transaction takes (--max-txn-ops ",
                                                   options_.max_txn_ops, " less the fence)"));
  }
  if (options_.fence.key.empty()) return absl::FailedPreconditionError("fenced: no leader fence to write under");
  ASSIGN_OR_RETURN(Writes w, PlanWrites(options_.prefix, changes));
  std::vector<Op> success;
  success.reserve(w.rows.size() + w.ledger.size());
  for (auto& [key, row] : w.rows) success.push_back(row ? Op::Put(key, *row) : Op::Delete(key));
  // Refused, the transaction reads what decides why: the fence's key and
  // each ledger key.
  std::vector<Op> failure = {Op::Range(options_.fence.key)};
  for (const auto& [key, row] : w.ledger) {
    success.push_back(Op::Put(key, row));
    failure.push_back(Op::Range(key));
  }
  // Ledger keys found holding this batch's own rows: an earlier try of this
  // very batch was applied though its answer was lost (the client retries a
  // call on another member; the committer retries a failed round).
  std::vector<bool> written(w.ledger.size(), false);
  for (;;) {
    std::vector<Compare> compares = {options_.fence};
    for (size_t i = 0; i < w.ledger.size(); ++i) {
      Compare c;
      c.key = w.ledger[i].first;
      if (written[i]) {
        c.target = Compare::Target::kValue;
        c.value = w.ledger[i].second;
      } else {
        c.target = Compare::Target::kVersion;  // 0: the key does not exist
      }
      compares.push_back(std::move(c));
    }
    absl::StatusOr<TxnResult> txn = client_->Txn(compares, success, failure);
    if (!txn.ok()) {
      return absl::UnavailableError(
          absl::StrCat("etcd store: commit of ", records, " records: ", txn.status().ToString()));
    }
    if (txn->succeeded) return absl::OkStatus();
    if (txn->ranges.size() != failure.size()) {
      return absl::InternalError(absl::StrCat("etcd store: a refused commit read ", txn->ranges.size(),
                                              " keys of ", failure.size()));
    }
    const std::vector<KeyValue>& leader = txn->ranges[0];
    if (!Holds(options_.fence, leader.empty() ? nullptr : &leader[0])) {
      if (options_.on_fenced) options_.on_fenced();
      return absl::FailedPreconditionError(absl::StrCat(
          "fenced: ", options_.fence.key,
          leader.empty() ? std::string(" is gone")
                         : absl::StrCat(" was created at revision ", leader[0].create_revision, " by ",
                                       leader[0].value.substr(0, 256)),
          " (this coordinator's term: ", options_.fence.number, "); nothing written"));
    }
    bool again = false;
    for (size_t i = 0; i < w.ledger.size(); ++i) {
      const std::vector<KeyValue>& found = txn->ranges[i + 1];
      if (written[i] && (found.empty() || found[0].value != w.ledger[i].second)) {
        return absl::InternalError(
            absl::StrCat("etcd store: ledger key ", w.ledger[i].first, " changed under the commit; nothing written"));
      }
      if (found.empty() || written[i]) continue;
      if (found[0].value != w.ledger[i].second) {
        return absl::InternalError(absl::StrCat("etcd store: ledger key ", w.ledger[i].first,
                                                " already holds another entry; nothing written"));
      }
      written[i] = again = true;
    }
    if (!again) {
      return absl::InternalError(absl::StrCat("etcd store: commit refused at revision ", txn->revision,
                                              " though its comparisons hold"));
    }
  }
}

}  // namespace athanor::coord::etcd
