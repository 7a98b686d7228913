// Bounding human-readable text (a job's reason, a rank's message) to a byte
// budget without cutting a word or a UTF-8 character in half, and saying
// that it was cut. Pure; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace athanor {

// What marks a cut: U+2026 HORIZONTAL ELLIPSIS, 3 bytes of UTF-8.
inline constexpr std::string_view kCutMark = "\xE2\x80\xA6";

// `text` unchanged when it fits in `max_bytes`. Otherwise its longest prefix
// that ends before a space, tab or newline, with the whitespace before the
// cut dropped, followed by kCutMark; the whole is at most `max_bytes` bytes.
// When no word boundary leaves room (a first word longer than the budget)
// the prefix ends at the last UTF-8 character boundary that fits instead.
// Below 3 bytes of budget there is no room for the mark: the result is the
// longest prefix ending at a character boundary, unmarked.
std::string TruncateAtWord(std::string_view text, size_t max_bytes);

}  // namespace athanor
