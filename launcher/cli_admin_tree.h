// The `athanor admin` command tree: groups, each of verbs, with the help of
// every level. Groups live in the files of their subject:
//   cli_security_admin.cc  ca, token, tenant, credentials (the Security service)
//   cli_billing.cc         price, plan, credit (the Billing service)
// and this file's RunAdmin (cli_commands.h) dispatches to them.
#pragma once

#include <string>
#include <vector>

#include "common/options.h"
#include "launcher/cli_commands.h"
#include "launcher/cli_help.h"

namespace athanor::cli {

// A verb's handler: args[0] is "admin GROUP VERB" (for messages), the rest
// its flags and operands.
using VerbHandler = int (*)(CliContext& ctx, const std::vector<std::string>& args);

struct AdminVerb {
  Subcommand help;  // name, synopsis, summary
  VerbHandler run;
};

struct AdminGroup {
  Subcommand help;
  std::string about;  // a paragraph for the group's own --help
  std::vector<AdminVerb> verbs;
};

const std::vector<AdminGroup>& SecurityAdminGroups();  // cli_security_admin.cc
const std::vector<AdminGroup>& BillingAdminGroups();   // cli_billing.cc

// "usage: athanor admin GROUP VERB SYNOPSIS\nSummary." for a verb's --help.
std::string VerbUsage(const std::string& group, const Subcommand& verb);

// Prints "athanor WHAT: MSG (see --help)" to stderr; returns kExitUsage.
int UsageError(const std::string& what, const std::string& msg);

// The first operand of a verb, named `name` among its options.
po::positional_options_description FirstOperand(const char* name);

}  // namespace athanor::cli
