#include "coordinator/volumes/owed_stores.h"

#include <algorithm>

namespace athanor::coord {
namespace {

// Removes the debts `drop` selects from `owed`, appending them to `out`;
// drops the jobs left owing nothing.
template <typename Drop>
void DropIf(std::map<std::string, std::vector<OwedStores::Owed>>& owed, std::vector<OwedStores::Owed>* out,
            Drop drop) {
  for (auto it = owed.begin(); it != owed.end();) {
    std::vector<OwedStores::Owed>& debts = it->second;
    auto keep = std::stable_partition(debts.begin(), debts.end(), [&](const OwedStores::Owed& o) { return !drop(o); });
    out->insert(out->end(), keep, debts.end());
    debts.erase(keep, debts.end());
    it = debts.empty() ? owed.erase(it) : std::next(it);
  }
}

}  // namespace

bool OwedStores::Reported(const std::string& node, const std::string& job_id, int32_t attempt,
                          const std::string& volume) {
  auto it = owed_.find(job_id);
  if (it == owed_.end()) return false;
  std::vector<Owed>& debts = it->second;
  auto d = std::find_if(debts.begin(), debts.end(), [&](const Owed& o) {
    return o.attempt == attempt && o.volume == volume && (node.empty() || o.node == node);
  });
  if (d == debts.end()) return false;
  debts.erase(d);
  if (debts.empty()) owed_.erase(it);
  return true;
}

std::vector<OwedStores::Owed> OwedStores::NodeLost(const std::string& node) {
  std::vector<Owed> out;
  DropIf(owed_, &out, [&](const Owed& o) { return o.node == node; });
  return out;
}

std::vector<OwedStores::Owed> OwedStores::Expire(TimePoint now) {
  std::vector<Owed> out;
  DropIf(owed_, &out, [&](const Owed& o) { return o.until <= now; });
  return out;
}

std::optional<OwedStores::Owed> OwedStores::First(const std::string& id) const {
  auto it = owed_.find(id);
  if (it == owed_.end() || it->second.empty()) return std::nullopt;
  return it->second.front();
}

std::set<std::string> OwedStores::Jobs() const {
  std::set<std::string> out;
  for (const auto& [id, debts] : owed_) out.insert(id);
  return out;
}

}  // namespace athanor::coord
