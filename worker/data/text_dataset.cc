#include "worker/data/text_dataset.h"

#include <charconv>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "worker/model/rng.h"

namespace athanor {

std::string SyntheticText(size_t bytes) {
  static const char* const kWords[] = {
      "the",   "model", "learns", "a",     "byte", "from",     "its",  "context", "and",
      "every", "rank",  "sums",   "grads", "in",   "order",    "so",   "that",    "weights",
      "match", "after", "each",   "step",  "of",   "training", "with", "care",    "data"};
  constexpr int kNum = sizeof(kWords) / sizeof(kWords[0]);
  std::string text;
  text.reserve(bytes + 16);
  SplitMix64 rng(12345);
  int prev = 0;
  while (text.size() < bytes) {
    // Mostly follow a fixed successor, sometimes jump: learnable but not trivial.
    const uint64_t r = rng.Next();
    const int next = (r % 4 == 0) ? static_cast<int>((r >> 8) % kNum) : (prev * 7 + 3) % kNum;
    text += kWords[next];
    text += (r >> 20) % 9 == 0 ? ".\n" : " ";
    prev = next;
  }
  text.resize(bytes);
  return text;
}

absl::StatusOr<TextDataset> TextDataset::Load(const std::string& source, int context) {
  std::string text;
  const std::string kSynthetic = "synthetic:";
  if (source.rfind(kSynthetic, 0) == 0) {
    const std::string n = source.substr(kSynthetic.size());
    size_t bytes = 0;
    auto [ptr, ec] = std::from_chars(n.data(), n.data() + n.size(), bytes);
    if (ec != std::errc() || ptr != n.data() + n.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad data source '", source, "': expected synthetic:BYTES"));
    }
    text = SyntheticText(bytes);
  } else {
    std::ifstream in(source, std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot open data file '", source, "'"));
    std::ostringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  if (context < 1 || text.size() < static_cast<size_t>(context) + 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("data '", source, "' has ", text.size(),
                     " bytes; need at least context+2 = ", context + 2));
  }
  return TextDataset(std::move(text), context);
}

TextDataset TextDataset::FromString(std::string text, int context) {
  return TextDataset(std::move(text), context);
}

void TextDataset::Fill(uint64_t seed, int64_t step, int64_t first, int count, uint8_t* contexts,
                       uint8_t* targets) const {
  const uint64_t span = text_.size() - static_cast<size_t>(context_);
  for (int j = 0; j < count; ++j) {
    const uint64_t i = static_cast<uint64_t>(first + j);
    const size_t off = Hash3(seed, static_cast<uint64_t>(step), i) % span;
    for (int c = 0; c < context_; ++c) {
      contexts[j * context_ + c] = static_cast<uint8_t>(text_[off + c]);
    }
    targets[j] = static_cast<uint8_t>(text_[off + context_]);
  }
}

}  // namespace athanor
