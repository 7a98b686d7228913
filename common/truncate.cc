#include "common/truncate.h"

namespace athanor {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// The largest n <= limit such that text[0, n) ends at a character boundary
// (text[n] is not a UTF-8 continuation byte). Requires limit < text.size().
size_t CharacterBoundary(std::string_view text, size_t limit) {
  size_t n = limit;
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return n;
}

}  // namespace

std::string TruncateAtWord(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  if (max_bytes < kCutMark.size()) return std::string(text.substr(0, CharacterBoundary(text, max_bytes)));
  const size_t budget = max_bytes - kCutMark.size();  // < text.size()
  // A cut before whitespace at index i <= budget keeps text[0, i) whole.
  size_t cut = budget;
  while (cut > 0 && !IsSpace(text[cut])) --cut;
  while (cut > 0 && IsSpace(text[cut - 1])) --cut;
  if (cut == 0) cut = CharacterBoundary(text, budget);
  std::string out(text.substr(0, cut));
  out.append(kCutMark);
  return out;
}

}  // namespace athanor
