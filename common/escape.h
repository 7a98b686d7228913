// Escaping text that came from tenants (job names, commands, paths, a rank's
// error text) before a daemon writes it to its log or a terminal shows it: a
// control character could otherwise forge log lines (a newline) or steer the
// terminal that reads the log (an escape sequence). Pure; thread-safe.
#pragma once

#include <string>
#include "absl/strings/string_view.h"
#include <vector>

namespace athanor {

// `text` with every C0 control character and DEL written as \xNN; bytes of
// UTF-8 past ASCII are kept. "a\nb" -> "a\x0ab".
std::string EscapeControls(absl::string_view text);

// The words of a command, each escaped and joined by single spaces.
std::string EscapeCommand(const std::vector<std::string>& argv);

}  // namespace athanor
