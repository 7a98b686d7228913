#include "coordinator/billing/price_book.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "coordinator/model/validation.h"

namespace athanor::coord {

namespace {
bool Before(const billing::Price& a, const billing::Price& b) {
  if (a.gpu_model() != b.gpu_model()) return a.gpu_model() < b.gpu_model();
  return a.effective_unix_ms() < b.effective_unix_ms();
}
}  // namespace

void PriceBook::Restore(std::vector<billing::Price> prices) {
  prices_ = std::move(prices);
  std::sort(prices_.begin(), prices_.end(), Before);
}

absl::Status PriceBook::Set(billing::Price* price, int64_t now_ms) {
  if (price->gpu_model() != kDefaultPriceModel) {
    if (absl::Status s = ValidateName("GPU model", price->gpu_model()); !s.ok()) return s;
  }
  if (price->gpu_hour_micros() < 0 || price->cpu_hour_micros() < 0 ||
      price->memory_gib_hour_micros() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("price of ", price->gpu_model(), ": amounts must not be negative"));
  }
  if (price->gpu_hour_micros() > kMaxHourMicros || price->cpu_hour_micros() > kMaxHourMicros ||
      price->memory_gib_hour_micros() > kMaxHourMicros) {
    return absl::InvalidArgumentError(absl::StrCat(
        "price of ", price->gpu_model(), ": at most 1000000.00 per hour"));
  }
  if (price->effective_unix_ms() == 0) price->set_effective_unix_ms(now_ms);
  if (price->effective_unix_ms() < now_ms) {
    return absl::InvalidArgumentError(absl::StrCat(
        "price of ", price->gpu_model(), ": takes effect at ", price->effective_unix_ms(),
        " ms, in the past (now ", now_ms, "); usage already charged is never repriced"));
  }
  price->set_set_unix_ms(now_ms);
  auto it = std::lower_bound(prices_.begin(), prices_.end(), *price, Before);
  if (it != prices_.end() && it->gpu_model() == price->gpu_model() &&
      it->effective_unix_ms() == price->effective_unix_ms()) {
    *it = *price;
  } else {
    prices_.insert(it, *price);
  }
  return absl::OkStatus();
}

const billing::Price* PriceBook::Newest(const std::string& model, int64_t t_ms) const {
  const billing::Price* found = nullptr;
  for (const billing::Price& p : prices_) {
    if (p.gpu_model() == model && p.effective_unix_ms() <= t_ms) found = &p;
  }
  return found;
}

const billing::Price* PriceBook::At(const std::string& gpu_model, int64_t t_ms) const {
  if (const billing::Price* own = Newest(gpu_model, t_ms)) return own;
  return Newest(kDefaultPriceModel, t_ms);
}

std::vector<int64_t> PriceBook::ChangesBetween(const std::string& gpu_model, int64_t from_ms,
                                               int64_t to_ms) const {
  std::vector<int64_t> out;
  for (const billing::Price& p : prices_) {
    if ((p.gpu_model() == gpu_model || p.gpu_model() == kDefaultPriceModel) &&
        p.effective_unix_ms() > from_ms && p.effective_unix_ms() < to_ms) {
      out.push_back(p.effective_unix_ms());
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace athanor::coord
