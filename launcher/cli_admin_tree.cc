#include "launcher/cli_admin_tree.h"

#include <iostream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace athanor::cli {
namespace {

// Every group, in the order `athanor admin --help` lists them.
std::vector<const AdminGroup*> Groups() {
  std::vector<const AdminGroup*> groups;
  for (const AdminGroup& g : SecurityAdminGroups()) groups.push_back(&g);
  for (const AdminGroup& g : BillingAdminGroups()) groups.push_back(&g);
  return groups;
}

std::string AdminHelp() {
  std::vector<Subcommand> list;
  for (const AdminGroup* g : Groups()) list.push_back(g->help);
  list.push_back({"status", "[--json]", "where the state lives, which coordinator leads, etcd's members"});
  return absl::StrCat(
      "usage: athanor admin GROUP VERB [ARGS...]\n"
      "The cluster CA, bearer tokens, tenants' limits and store credentials, and billing:\n"
      "prices, plans and credit. `ca` works on files only; the others call the coordinator\n"
      "(admins only).\n\n",
      FormatSubcommands(list),
      "\n`athanor admin GROUP --help` lists a group's verbs; `athanor admin GROUP VERB --help`\n"
      "describes one.\n");
}

std::string GroupHelp(const AdminGroup& g) {
  std::vector<Subcommand> list;
  for (const AdminVerb& v : g.verbs) list.push_back(v.help);
  return absl::StrCat("usage: athanor admin ", g.help.name, " VERB [ARGS...]\n", g.about, "\n\n",
                      FormatSubcommands(list), "\n`athanor admin ", g.help.name,
                      " VERB --help` describes one.\n");
}

std::string VerbNames(const AdminGroup& g) {
  std::vector<std::string> names;
  for (const AdminVerb& v : g.verbs) names.push_back(v.help.name);
  return absl::StrJoin(names, ", ");
}

// args[0] is the group's name.
int RunGroup(CliContext& ctx, const AdminGroup& g, const std::vector<std::string>& args) {
  const std::string what = "admin " + g.help.name;
  if (args.size() < 2) return UsageError(what, "expected one of " + VerbNames(g));
  if (IsHelpFlag(args[1])) {
    std::cout << GroupHelp(g);
    return kExitOk;
  }
  for (const AdminVerb& v : g.verbs) {
    if (v.help.name != args[1]) continue;
    std::vector<std::string> rest(args.begin() + 1, args.end());
    rest[0] = what + " " + v.help.name;
    return v.run(ctx, rest);
  }
  return UsageError(what, "expected one of " + VerbNames(g) + ", got '" + args[1] + "'");
}

}  // namespace

std::string VerbUsage(const std::string& group, const Subcommand& verb) {
  std::string what = verb.summary;
  if (!what.empty()) what[0] = absl::ascii_toupper(what[0]);
  return absl::StrCat("usage: athanor admin ", group, " ", verb.name,
                      verb.synopsis.empty() ? "" : " ", verb.synopsis, "\n", what, ".");
}

int UsageError(const std::string& what, const std::string& msg) {
  std::cerr << "athanor " << what << ": " << msg << " (see --help)\n";
  return kExitUsage;
}

po::positional_options_description FirstOperand(const char* name) {
  po::positional_options_description p;
  p.add(name, 1);
  return p;
}

int RunAdmin(CliContext& ctx, const std::vector<std::string>& args) {
  if (args.size() < 2) {
    std::cerr << AdminHelp();
    return kExitUsage;
  }
  if (IsHelpFlag(args[1])) {
    std::cout << AdminHelp();
    return kExitOk;
  }
  if (args[1] == "status") {  // a verb of its own, no group (cli_admin.cc)
    std::vector<std::string> rest(args.begin() + 1, args.end());
    rest[0] = "admin status";
    return RunAdminStatus(ctx, rest);
  }
  for (const AdminGroup* g : Groups()) {
    if (g->help.name == args[1]) {
      return RunGroup(ctx, *g, std::vector<std::string>(args.begin() + 1, args.end()));
    }
  }
  return UsageError("admin", "unknown admin command '" + args[1] + "'");
}

}  // namespace athanor::cli
