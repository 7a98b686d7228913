#include "coordinator/billing/meter.h"

#include <algorithm>
#include <map>

#include "coordinator/billing/calendar.h"

namespace athanor::coord {

int64_t CostOf(const billing::Price& price, const HeldShare& share, int64_t ms) {
  // Per hour, in 1/1024 micro-units so that memory is priced per MiB exactly.
  const __int128 rate = static_cast<__int128>(share.gpus) * price.gpu_hour_micros() * 1024 +
                        static_cast<__int128>(share.cpus) * price.cpu_hour_micros() * 1024 +
                        static_cast<__int128>(share.memory_mb) * price.memory_gib_hour_micros();
  const __int128 per = static_cast<__int128>(3600 * 1000) * 1024;
  return static_cast<int64_t>(rate * ms / per);
}

std::vector<billing::LedgerEntry> Accruals(const Ledger& ledger, const PriceBook& book,
                                           const AttemptHold& hold, int64_t from_ms,
                                           int64_t to_ms, int64_t now_ms) {
  std::vector<billing::LedgerEntry> out;
  if (to_ms <= from_ms) return out;
  // A key can come twice in one call (a cut where another model's or the
  // default's price changes, or at a month's end, under the same price): its
  // later pieces count the earlier ones, which are not in the ledger yet.
  std::map<AccrualKey, int64_t> ms_here;
  for (const HeldShare& share : hold.shares) {
    std::vector<int64_t> cuts = book.ChangesBetween(share.gpu_model, from_ms, to_ms);
    for (int64_t m = NextMonthStartMs(from_ms); m < to_ms; m = NextMonthStartMs(m)) {
      cuts.push_back(m);
    }
    cuts.push_back(to_ms);
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    int64_t start = from_ms;
    for (int64_t end : cuts) {
      const billing::Price* price = book.At(share.gpu_model, start);
      billing::LedgerEntry e;
      e.set_tenant(hold.tenant);
      e.set_kind(billing::ACCRUAL);
      e.set_created_unix_ms(now_ms);
      e.set_job_id(hold.job_id);
      e.set_attempt(hold.attempt);
      e.set_gpu_model(share.gpu_model);
      e.set_gpus(share.gpus);
      e.set_span_start_unix_ms(start);
      e.set_span_end_unix_ms(end);
      if (price != nullptr) {
        e.set_price_model(price->gpu_model());
        e.set_price_effective_unix_ms(price->effective_unix_ms());
        int64_t& here = ms_here[KeyOf(e)];
        const int64_t before = ledger.TotalsOf(KeyOf(e)).ms + here;
        e.set_amount_micros(CostOf(*price, share, before) -
                            CostOf(*price, share, before + (end - start)));
        here += end - start;
      }
      out.push_back(std::move(e));
      start = end;
    }
  }
  return out;
}

std::vector<billing::LedgerEntry> Refunds(const Ledger& ledger, const std::string& tenant,
                                          const std::string& job_id, int32_t attempt,
                                          const std::string& why, int64_t now_ms) {
  std::vector<billing::LedgerEntry> out;
  for (const auto& [key, totals] : ledger.KeysOf(job_id, attempt)) {
    if (totals.amount == 0) continue;
    billing::LedgerEntry e;
    e.set_tenant(tenant);
    e.set_kind(billing::REFUND);
    e.set_amount_micros(-totals.amount);
    e.set_created_unix_ms(now_ms);
    e.set_job_id(job_id);
    e.set_attempt(attempt);
    e.set_gpu_model(key.gpu_model);
    e.set_price_model(key.price_model);
    e.set_price_effective_unix_ms(key.price_effective_unix_ms);
    e.set_note(why);
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace athanor::coord
