#include "launcher/cli_help.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace athanor::cli {
namespace {

// Synopses up to this wide share their line with the summary.
constexpr size_t kMaxColumn = 48;

std::string Head(const Subcommand& s) {
  return s.synopsis.empty() ? s.name : absl::StrCat(s.name, " ", s.synopsis);
}

}  // namespace

std::string FormatSubcommands(const std::vector<Subcommand>& subcommands, const std::string& title) {
  size_t column = 0;
  for (const Subcommand& s : subcommands) {
    size_t width = Head(s).size();
    if (width <= kMaxColumn) column = std::max(column, width);
  }
  std::string out = absl::StrCat(title, ":\n");
  for (const Subcommand& s : subcommands) {
    std::string head = Head(s);
    absl::StrAppend(&out, "  ", head);
    if (head.size() > column) {
      absl::StrAppend(&out, "\n", std::string(column + 2, ' '));
    } else {
      out.append(column - head.size(), ' ');
    }
    absl::StrAppend(&out, "  ", s.summary, "\n");
  }
  return out;
}

bool IsHelpFlag(const std::string& arg) { return arg == "--help" || arg == "-h"; }

bool AsksForHelp(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (a == "--") return false;
    if (IsHelpFlag(a)) return true;
  }
  return false;
}

}  // namespace athanor::cli
