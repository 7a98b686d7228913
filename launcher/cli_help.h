// Help text shared by the levels of the `athanor` command tree.
//
// Every level that has subcommands lists them under a line "commands:" (or
// "admin commands:"), one "  NAME ..." line each, up to a blank line; lines
// that continue one are indented further. tests/cli_help/cli_help_test.sh
// walks the whole tree by this convention, so keep to it. Pure; thread-safe.
#pragma once

#include <string>
#include <vector>

namespace athanor::cli {

// One subcommand as its parent's help lists it.
struct Subcommand {
  std::string name;      // "create"
  std::string synopsis;  // its arguments: "--tenant T [--ttl D]" (may be empty)
  std::string summary;   // what it does, one line
};

// "TITLE:\n" then "  NAME SYNOPSIS  SUMMARY" per subcommand, summaries
// aligned in one column; a summary that does not fit beside a long synopsis
// goes on the next line, indented to that column. TITLE ends in "commands".
std::string FormatSubcommands(const std::vector<Subcommand>& subcommands,
                              const std::string& title = "commands");

// "--help" or "-h".
bool IsHelpFlag(const std::string& arg);

// Whether `args` ask for help: --help or -h before any lone "--" (after it,
// arguments belong to the job's command).
bool AsksForHelp(const std::vector<std::string>& args);

}  // namespace athanor::cli
