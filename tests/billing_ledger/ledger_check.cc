#include "tests/billing_ledger/ledger_check.h"

#include <algorithm>
#include <cmath>
#include <compare>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"

namespace athanor::testing {
namespace {

constexpr char kDefaultModel[] = "*";

// A price by its identity; an empty model: free (no price in force).
struct PriceId {
  std::string model;
  int64_t effective_ms = 0;
  auto operator<=>(const PriceId&) const = default;
};

// What one accrual line charges for, within one attempt.
struct LineKey {
  std::string gpu_model;
  PriceId price;
  auto operator<=>(const LineKey&) const = default;
};

struct Share {
  int64_t gpus = 0;
  int64_t cpus = 0;
  int64_t memory_mb = 0;
};

using AttemptId = std::pair<std::string, int32_t>;  // job id, attempt

PriceId IdOf(const billing::Price* p) {
  return p == nullptr ? PriceId{} : PriceId{p->gpu_model(), p->effective_unix_ms()};
}

LineKey KeyOf(const billing::LedgerEntry& e) {
  return {e.gpu_model(), {e.price_model(), e.price_effective_unix_ms()}};
}

std::string Name(const LineKey& k) {
  if (k.price.model.empty()) return absl::StrCat(k.gpu_model, " (free)");
  return absl::StrCat(k.gpu_model, " at ", k.price.model, "@", k.price.effective_ms);
}

std::string Describe(const billing::LedgerEntry& e) {
  return absl::StrCat("entry ", e.id(), " (", billing::EntryKind_Name(e.kind()), ", ",
                      Name(KeyOf(e)), ", [", e.span_start_unix_ms(), ", ", e.span_end_unix_ms(),
                      "), ", e.amount_micros(), " micros)");
}

int64_t ToMs(double unix_seconds) { return std::llround(unix_seconds * 1000.0); }

int64_t MonthIndex(int64_t unix_ms) {
  absl::CivilMonth m = absl::ToCivilMonth(absl::FromUnixMillis(unix_ms), absl::UTCTimeZone());
  return m.year() * 12 + m.month();
}

// The times in (from_ms, to_ms) at which the price in force for `model` may
// change: the effective times of its own prices and of the default's.
std::vector<int64_t> PriceTimes(const std::vector<billing::Price>& prices, const std::string& model,
                                int64_t from_ms, int64_t to_ms) {
  std::vector<int64_t> out;
  for (const billing::Price& p : prices) {
    if ((p.gpu_model() == model || p.gpu_model() == kDefaultModel) &&
        p.effective_unix_ms() > from_ms && p.effective_unix_ms() < to_ms) {
      out.push_back(p.effective_unix_ms());
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

const billing::Price* Newest(const std::vector<billing::Price>& prices, const std::string& model,
                             int64_t t_ms) {
  const billing::Price* found = nullptr;
  for (const billing::Price& p : prices) {
    if (p.gpu_model() != model || p.effective_unix_ms() > t_ms) continue;
    if (found == nullptr || p.effective_unix_ms() > found->effective_unix_ms()) found = &p;
  }
  return found;
}

// Checks one attempt's accruals and refunds against its recomputation;
// adds what the tenant should have been charged and refunded to *out.
class AttemptCheck {
 public:
  AttemptCheck(const BilledWorld& world, const rpc::Job& job, const rpc::AttemptNodes& attempt,
               LedgerCheck* out)
      : world_(world),
        job_(job),
        attempt_(attempt),
        out_(out),
        what_(absl::StrCat("job ", job.id(), " attempt ", attempt.attempt())) {}

  void Run(const std::vector<const billing::LedgerEntry*>& accruals,
           const std::vector<const billing::LedgerEntry*>& refunds) {
    start_ms_ = ToMs(attempt_.start_unix());
    end_ms_ = ToMs(attempt_.end_unix());
    if (!HeldShares()) return;
    Expect();
    for (const billing::LedgerEntry* e : accruals) CheckAccrual(*e);
    CheckCoverage(accruals);
    CompareCharges(refunds);
  }

 private:
  void Mismatch(std::string what) { out_->mismatches.push_back(absl::StrCat(what_, ": ", what)); }

  bool HeldShares() {
    std::set<std::string> seen;
    for (const std::string& node : attempt_.nodes()) {
      if (!seen.insert(node).second) continue;
      auto it = world_.model_of_node.find(node);
      if (it == world_.model_of_node.end()) {
        Mismatch(absl::StrCat("ran on node ", node, ", not one of the fleet's"));
        return false;
      }
      Share& s = shares_[it->second];
      s.gpus += job_.spec().gpus_per_node();
      s.cpus += job_.spec().cpus_per_node();
      s.memory_mb += job_.spec().memory_mb_per_node();
    }
    return true;
  }

  // The span cut where the price in force may change; ms per line.
  void Expect() {
    for (const auto& [model, share] : shares_) {
      std::vector<int64_t> cuts = PriceTimes(world_.prices, model, start_ms_, end_ms_);
      cuts.push_back(end_ms_);
      int64_t from = start_ms_;
      for (int64_t to : cuts) {
        if (to <= from) continue;
        const billing::Price* p = PriceInForce(world_.prices, model, from);
        LineKey key{model, IdOf(p)};
        expected_ms_[key] += to - from;
        price_of_[key] = p;
        from = to;
      }
    }
  }

  void CheckAccrual(const billing::LedgerEntry& e) {
    const int64_t s = e.span_start_unix_ms(), t = e.span_end_unix_ms();
    if (e.tenant() != job_.spec().tenant()) {
      Mismatch(absl::StrCat(Describe(e), " is written to tenant '", e.tenant(), "', not '",
                            job_.spec().tenant(), "'"));
    }
    auto share = shares_.find(e.gpu_model());
    if (share == shares_.end()) {
      Mismatch(absl::StrCat(Describe(e), " charges a GPU model the attempt did not hold"));
    } else if (e.gpus() != share->second.gpus) {
      Mismatch(absl::StrCat(Describe(e), " charges ", e.gpus(), " GPUs; the attempt held ",
                            share->second.gpus));
    }
    if (t <= s) Mismatch(absl::StrCat(Describe(e), " has an empty or reversed span"));
    if (e.amount_micros() > 0) Mismatch(absl::StrCat(Describe(e), " is a positive accrual"));
    const PriceId in_force = IdOf(PriceInForce(world_.prices, e.gpu_model(), s));
    if (in_force != KeyOf(e).price) {
      Mismatch(absl::StrCat(Describe(e), " charges a price not in force at its start (",
                            Name({e.gpu_model(), in_force}), ")"));
    }
    for (int64_t c : PriceTimes(world_.prices, e.gpu_model(), s, t)) {
      if (IdOf(PriceInForce(world_.prices, e.gpu_model(), c)) != in_force) {
        Mismatch(absl::StrCat(Describe(e), " runs across the price change at ", c, " ms"));
      }
    }
    if (t > s && MonthIndex(s) != MonthIndex(t - 1)) {
      Mismatch(absl::StrCat(Describe(e), " runs across a month boundary"));
    }
    charged_[KeyOf(e)] += e.amount_micros();
  }

  // Per GPU model: the accruals tile [start, end) exactly.
  void CheckCoverage(const std::vector<const billing::LedgerEntry*>& accruals) {
    for (const auto& [model, share] : shares_) {
      std::vector<const billing::LedgerEntry*> spans;
      for (const billing::LedgerEntry* e : accruals) {
        if (e->gpu_model() == model) spans.push_back(e);
      }
      std::sort(spans.begin(), spans.end(), [](const auto* a, const auto* b) {
        return std::make_pair(a->span_start_unix_ms(), a->id()) <
               std::make_pair(b->span_start_unix_ms(), b->id());
      });
      int64_t cursor = start_ms_;
      for (const billing::LedgerEntry* e : spans) {
        if (e->span_start_unix_ms() < cursor) {
          Mismatch(absl::StrCat(Describe(*e), " charges [", e->span_start_unix_ms(), ", ",
                                std::min(cursor, e->span_end_unix_ms()),
                                ") again (charged already, or before the attempt's start ",
                                start_ms_, ")"));
        } else if (e->span_start_unix_ms() > cursor) {
          Mismatch(absl::StrCat(model, " [", cursor, ", ", e->span_start_unix_ms(),
                                ") is not charged (before ", Describe(*e), ")"));
        }
        cursor = std::max(cursor, e->span_end_unix_ms());
      }
      if (cursor < end_ms_) {
        Mismatch(absl::StrCat(model, " [", cursor, ", ", end_ms_, ") is not charged (",
                              spans.size(), " accruals; the attempt ran [", start_ms_, ", ",
                              end_ms_, "))"));
      } else if (cursor > end_ms_) {
        Mismatch(
            absl::StrCat(model, " charged up to ", cursor, ", past the attempt's end ", end_ms_));
      }
    }
  }

  void CompareCharges(const std::vector<const billing::LedgerEntry*>& refund_entries) {
    const std::string& tenant = job_.spec().tenant();
    auto plan = world_.free_platform_faults.find(tenant);
    const bool refund =
        attempt_.platform_fault() && plan != world_.free_platform_faults.end() && plan->second;
    if (refund) ++out_->refunded_attempts;
    std::map<LineKey, int64_t> refunded;
    for (const billing::LedgerEntry* e : refund_entries) {
      if (e->tenant() != tenant) {
        Mismatch(absl::StrCat(Describe(*e), " is written to tenant '", e->tenant(), "'"));
      }
      refunded[KeyOf(*e)] += e->amount_micros();
    }
    std::set<LineKey> keys;
    for (const auto& [k, ms] : expected_ms_) keys.insert(k);
    for (const auto& [k, amount] : charged_) keys.insert(k);
    for (const auto& [k, amount] : refunded) keys.insert(k);
    for (const LineKey& k : keys) {
      const int64_t ms = expected_ms_.count(k) ? expected_ms_.at(k) : 0;
      const billing::Price* p = price_of_.count(k) ? price_of_.at(k) : nullptr;
      const Share share = shares_.count(k.gpu_model) ? shares_.at(k.gpu_model) : Share{};
      const int64_t expected =
          p == nullptr ? 0 : -CostMicros(*p, share.gpus, share.cpus, share.memory_mb, ms);
      const int64_t charged = charged_.count(k) ? charged_.at(k) : 0;
      if (charged != expected) {
        Mismatch(absl::StrCat(Name(k), ": the ledger's accruals sum to ", charged,
                              " micros; recomputed ", expected, " micros for ", ms, " ms of ",
                              share.gpus, " GPUs, ", share.cpus, " CPUs, ", share.memory_mb,
                              " MiB"));
      }
      const int64_t expected_refund = refund ? -expected : 0;
      const int64_t got_refund = refunded.count(k) ? refunded.at(k) : 0;
      if (got_refund != expected_refund) {
        Mismatch(absl::StrCat(Name(k), ": refunded ", got_refund, " micros, expected ",
                              expected_refund,
                              refund ? " (a platform fault of a tenant whose plan makes them free)"
                                     : " (not a refunded attempt)"));
      }
      out_->expected_balance[tenant] += expected + expected_refund;
    }
    out_->keys += static_cast<int>(expected_ms_.size());
  }

  const BilledWorld& world_;
  const rpc::Job& job_;
  const rpc::AttemptNodes& attempt_;
  LedgerCheck* const out_;
  const std::string what_;
  int64_t start_ms_ = 0, end_ms_ = 0;
  std::map<std::string, Share> shares_;  // by GPU model
  std::map<LineKey, int64_t> expected_ms_;
  std::map<LineKey, const billing::Price*> price_of_;
  std::map<LineKey, int64_t> charged_;
};

}  // namespace

const billing::Price* PriceInForce(const std::vector<billing::Price>& prices,
                                   const std::string& gpu_model, int64_t t_ms) {
  if (const billing::Price* own = Newest(prices, gpu_model, t_ms)) return own;
  return Newest(prices, kDefaultModel, t_ms);
}

int64_t CostMicros(const billing::Price& price, int64_t gpus, int64_t cpus, int64_t memory_mb,
                   int64_t ms) {
  const __int128 per_hour_1024 = static_cast<__int128>(gpus) * price.gpu_hour_micros() * 1024 +
                                 static_cast<__int128>(cpus) * price.cpu_hour_micros() * 1024 +
                                 static_cast<__int128>(memory_mb) * price.memory_gib_hour_micros();
  return static_cast<int64_t>(per_hour_1024 * ms / (static_cast<__int128>(3600000) * 1024));
}

std::string LedgerCheck::Listing(size_t n) const {
  std::string out;
  for (size_t i = 0; i < mismatches.size() && i < n; ++i)
    absl::StrAppend(&out, "  ", mismatches[i], "\n");
  if (mismatches.size() > n) absl::StrAppend(&out, "  ... and ", mismatches.size() - n, " more\n");
  return out;
}

LedgerCheck CheckLedger(const BilledWorld& world, const std::vector<billing::LedgerEntry>& ledger) {
  LedgerCheck out;
  std::map<AttemptId, std::vector<const billing::LedgerEntry*>> accruals, refunds;
  std::map<std::string, int64_t> credited;
  for (const billing::LedgerEntry& e : ledger) {
    out.ledger_balance[e.tenant()] += e.amount_micros();
    switch (e.kind()) {
      case billing::ACCRUAL:
        ++out.accruals;
        accruals[{e.job_id(), e.attempt()}].push_back(&e);
        break;
      case billing::REFUND:
        ++out.refunds;
        refunds[{e.job_id(), e.attempt()}].push_back(&e);
        break;
      case billing::CREDIT:
        credited[e.tenant()] += e.amount_micros();
        break;
      default:  // allowances: taken as written (the plans here grant none)
        out.expected_balance[e.tenant()] += e.amount_micros();
        break;
    }
  }
  for (const auto& [tenant, amount] : world.credits) out.expected_balance[tenant] += amount;
  for (const auto& [tenant, amount] : credited) {
    auto sent = world.credits.find(tenant);
    if (sent == world.credits.end() || sent->second != amount) {
      out.mismatches.push_back(absl::StrCat("tenant ", tenant, ": credits in the ledger sum to ",
                                            amount, " micros; added ",
                                            sent == world.credits.end() ? 0 : sent->second));
    }
  }

  std::set<AttemptId> seen;
  static const std::vector<const billing::LedgerEntry*> kNone;
  for (const rpc::Job& job : world.jobs) {
    for (const rpc::AttemptNodes& a : job.attempts()) {
      const AttemptId id{job.id(), a.attempt()};
      seen.insert(id);
      if (a.nodes().empty()) continue;
      if (a.end_unix() == 0) {
        out.mismatches.push_back(absl::StrCat("job ", job.id(), " attempt ", a.attempt(),
                                              " has not ended; its charges cannot be checked"));
        continue;
      }
      ++out.attempts;
      auto acc = accruals.find(id);
      auto ref = refunds.find(id);
      AttemptCheck(world, job, a, &out)
          .Run(acc == accruals.end() ? kNone : acc->second,
               ref == refunds.end() ? kNone : ref->second);
    }
  }
  for (const auto* index : {&accruals, &refunds}) {
    for (const auto& [id, entries] : *index) {
      if (seen.count(id)) continue;
      for (const billing::LedgerEntry* e : entries) {
        out.mismatches.push_back(absl::StrCat(Describe(*e), " names job ", id.first, " attempt ",
                                              id.second, ", which GetJob does not list"));
      }
    }
  }

  std::set<std::string> tenants;
  for (const auto& [t, b] : out.expected_balance) tenants.insert(t);
  for (const auto& [t, b] : out.ledger_balance) tenants.insert(t);
  for (const std::string& t : tenants) {
    const int64_t want = out.expected_balance[t], got = out.ledger_balance[t];
    if (want != got) {
      out.mismatches.push_back(absl::StrCat("tenant ", t, ": the ledger's entries sum to ", got,
                                            " micros; credits - charges + refunds = ", want));
    }
  }
  return out;
}

}  // namespace athanor::testing
