// EtcdStore::LoadAll: every record under the prefix, read in pages, decoded
// and put in SqliteStore's order (jobs by seq, nodes by name, prices by
// model and effective time, ...), whatever order the keys sort in.
#include <algorithm>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status.h"
#include "coordinator/store/etcd/etcd_store.h"
#include "coordinator/store/record_codec.h"

namespace athanor::coord::etcd {
namespace {

// Reads that saw a write between their pages are thrown away and read again,
// at most this many times in all.
constexpr int kMaxLoadTries = 5;

absl::Status BadKey(const KeyValue& kv, absl::string_view why) {
  return absl::DataLossError(absl::StrCat("etcd state, key ", kv.key, ": ", why));
}

// A key's segment back to the name it was made of: the inverse of Segment()
// in etcd_store.cc (%2F and %25 stand for '/' and '%').
absl::StatusOr<std::string> Unsegment(absl::string_view segment) {
  std::string out;
  for (size_t i = 0; i < segment.size(); ++i) {
    if (segment[i] != '%') {
      out += segment[i];
    } else if (segment.substr(i, 3) == "%2F") {
      out += '/';
      i += 2;
    } else if (segment.substr(i, 3) == "%25") {
      out += '%';
      i += 2;
    } else {
      return absl::DataLossError(absl::StrCat("a stray '%' at ", i, " of ", segment));
    }
  }
  return out;
}

// Decodes one key of `kind` into `out`. Keys of other kinds (the leader's)
// are no records.
absl::Status Decode(absl::string_view kind, const KeyValue& kv, Store::Contents* out) {
  auto billing_row = [&](const char* what, auto* rows) {
    absl::Status s = DecodeBillingRow(what, kv.value, &rows->emplace_back());
    return s.ok() ? s : BadKey(kv, s.message());
  };
  if (kind == "jobs") {
    absl::StatusOr<JobRecord> job = DecodeJob(kv.value);
    if (!job.ok()) return BadKey(kv, job.status().message());
    out->jobs.push_back(*std::move(job));
  } else if (kind == "nodes") {
    absl::StatusOr<NodeRecord> node = DecodeNode(kv.value);
    if (!node.ok()) return BadKey(kv, node.status().message());
    out->nodes.push_back(*std::move(node));
  } else if (kind == "quotas") {
    // The row is the count alone: the tenant is the key's last segment.
    absl::StatusOr<std::string> tenant = Unsegment(absl::string_view(kv.key).substr(kv.key.rfind('/') + 1));
    if (!tenant.ok()) return BadKey(kv, tenant.status().message());
    int32_t gpus = 0;
    if (!absl::SimpleAtoi(kv.value, &gpus)) return BadKey(kv, absl::StrCat("quota \"", kv.value.substr(0, 32), "\" is no GPU count"));
    out->quotas[*std::move(tenant)] = gpus;
  } else if (kind == "prices") {
    return billing_row("prices", &out->prices);
  } else if (kind == "plans") {
    return billing_row("plans", &out->plans);
  } else if (kind == "ledger") {
    return billing_row("ledger", &out->ledger);
  } else if (kind == "images") {
    return billing_row("images", &out->images);
  } else if (kind == "volumes") {
    return billing_row("volumes", &out->volumes);
  } else if (kind == "snapshots") {
    return billing_row("snapshots", &out->snapshots);
  }
  return absl::OkStatus();
}

void SortAsSqlite(Store::Contents* c) {
  std::sort(c->jobs.begin(), c->jobs.end(), [](const JobRecord& a, const JobRecord& b) { return a.seq < b.seq; });
  std::sort(c->nodes.begin(), c->nodes.end(),
            [](const NodeRecord& a, const NodeRecord& b) { return a.name < b.name; });
  std::sort(c->prices.begin(), c->prices.end(), [](const billing::Price& a, const billing::Price& b) {
    return std::forward_as_tuple(a.gpu_model(), a.effective_unix_ms()) <
           std::forward_as_tuple(b.gpu_model(), b.effective_unix_ms());
  });
  std::sort(c->plans.begin(), c->plans.end(),
            [](const billing::Plan& a, const billing::Plan& b) { return a.tenant() < b.tenant(); });
  std::sort(c->ledger.begin(), c->ledger.end(),
            [](const billing::LedgerEntry& a, const billing::LedgerEntry& b) { return a.id() < b.id(); });
  auto by_tenant_name = [](const auto& a, const auto& b) {
    return std::forward_as_tuple(a.tenant(), a.name()) < std::forward_as_tuple(b.tenant(), b.name());
  };
  std::sort(c->images.begin(), c->images.end(), by_tenant_name);
  std::sort(c->volumes.begin(), c->volumes.end(), by_tenant_name);
  std::sort(c->snapshots.begin(), c->snapshots.end(),
            [](const rpc::InstanceSnapshot& a, const rpc::InstanceSnapshot& b) { return a.id() < b.id(); });
}

}  // namespace

absl::StatusOr<Store::Contents> EtcdStore::LoadAll() {
  if (options_.page < 1) return absl::InvalidArgumentError(absl::StrCat("etcd store: page of ", options_.page, " keys"));
  const std::string start = options_.prefix + "/";
  const std::string end = PrefixEnd(start);
  for (int attempt = 1; attempt <= kMaxLoadTries; ++attempt) {
    // etcd answers each page at the revision it has then; pages that all
    // saw one revision saw one state (every write moves the revision), so
    // the load is a snapshot at that revision. A write between pages (by
    // anyone, under any prefix) starts it over.
    Contents out;
    int64_t revision = 0;
    bool moved = false;
    std::string from = start;
    for (;;) {
      absl::StatusOr<RangeResult> page = client_->Range(from, end, options_.page);
      if (!page.ok()) return absl::UnavailableError(absl::StrCat("etcd store: load: ", page.status().ToString()));
      if (revision == 0) revision = page->revision;
      if (page->revision != revision) {
        moved = true;
        break;
      }
      for (const KeyValue& kv : page->kvs) {
        if (kv.key.size() <= start.size() || kv.key.compare(0, start.size(), start) != 0) {
          return BadKey(kv, absl::StrCat("outside the range asked for, ", start));
        }
        const absl::string_view rest = absl::string_view(kv.key).substr(start.size());
        RETURN_IF_ERROR(Decode(rest.substr(0, rest.find('/')), kv, &out));
      }
      if (!page->more || page->kvs.empty()) break;
      // The next page starts right after this one's last key.
      from = page->kvs.back().key + '\0';
    }
    if (moved) continue;
    SortAsSqlite(&out);
    return out;
  }
  return absl::UnavailableError(absl::StrCat("etcd store: load: the state changed under every one of ",
                                             kMaxLoadTries, " reads"));
}

}  // namespace athanor::coord::etcd
