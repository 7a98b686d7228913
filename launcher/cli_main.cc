// athanor: the cluster's command-line client.
//
//   athanor [--coordinator HOST:PORT] COMMAND [ARGS...]
//
// The coordinator address comes from --coordinator, else $ATHANOR_COORDINATOR,
// else 127.0.0.1:7700. Exit codes: see launcher/cli_commands.h.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "launcher/cli_commands.h"
#include "launcher/cli_help.h"
#include "launcher/cli_security.h"

namespace athanor::cli {
namespace {

constexpr char kDefaultCoordinator[] = "127.0.0.1:7700";

using Command = int (*)(CliContext&, const std::vector<std::string>&);

struct Entry {
  Subcommand help;
  Command run;
  bool admin;  // listed under "admin commands"
};

// Every command, in the order `athanor --help` lists them.
const std::vector<Entry>& Commands() {
  static const std::vector<Entry>* commands = new std::vector<Entry>{
      {{"submit", "--nodes N|MIN:MAX --gpus-per-node G [...] -- CMD [ARGS...]", "submit a job, print its id"},
       RunSubmit, false},
      {{"jobs", "[--all] [--json]", "list jobs"}, RunJobs, false},
      {{"job", "ID [--json]", "show one job and its ranks"}, RunJob, false},
      {{"nodes", "[--json]", "list nodes"}, RunNodes, false},
      {{"cancel", "ID", "cancel a job"}, RunCancel, false},
      {{"wait", "ID [--timeout S]", "wait for a job (exit 0 only if it SUCCEEDED)"}, RunWait, false},
      {{"logs", "ID [--rank R] [--attempt N]", "print the ranks' output"}, RunLogs, false},
      {{"alloc", "--nodes N --gpus-per-node G --idle-timeout D [-- CMD]", "hold an interactive gang"},
       RunAlloc, false},
      {{"shell", "ID [--rank R] [-- CMD...]", "a terminal on a rank of a running job"}, RunShell, false},
      {{"snapshots", "[rm ID] [--tenant T] [--json]", "reclaimed instances' snapshots (alloc --restore)"},
       RunSnapshots, false},
      {{"why", "ID [--json]", "why a job is pending (quota, fit, queue)"}, RunWhy, false},
      {{"checkpoints", "ID [--uri URI] [--json]", "a job's committed checkpoints"}, RunCheckpoints, false},
      {{"bill", "[--tenant T] [--month YYYY-MM] [--json|--csv]", "a month's charges, credit and balance"},
       RunBill, false},
      {{"balance", "[--tenant T] [--json]", "what tenants have left to spend"}, RunBalance, false},
      {{"top", "[--interval S] [--once]", "live cluster view (q quits)"}, RunTop, false},
      {{"image", "import|ls|rm ...", "environment images your jobs run in"}, RunImage, false},
      {{"volume", "create|ls|rm|snapshot ...", "persistent volumes your jobs mount"}, RunVolume, false},
      {{"preempt", "ID [--grace S]", "checkpoint, stop and requeue a running job"}, RunPreempt, true},
      {{"drain", "NODE [--grace S] [--reason R]", "move jobs off a node; no new work"}, RunDrain, true},
      {{"undrain", "NODE", "let a drained node take work again"}, RunUndrain, true},
      {{"usage", "[--tenant T] [--since D] [--json]", "GPU-seconds per tenant and job"}, RunUsage, true},
      {{"quota", "[set TENANT GPUS | unset TENANT] [--json]", "show or change GPU quotas"}, RunQuota, true},
      {{"admin", "ca|token|tenant|credentials|price|plan|credit ...",
        "cluster CA, bearer tokens, tenants' limits, prices, plans and credit"},
       RunAdmin, true},
  };
  return *commands;
}

void Usage(std::ostream& out) {
  std::vector<Subcommand> user, admin;
  for (const Entry& e : Commands()) (e.admin ? admin : user).push_back(e.help);
  out << "usage: athanor [--coordinator HOST:PORT[,HOST:PORT...]] [--ca FILE] [--token-file FILE] COMMAND "
         "[ARGS...]\n\n"
         "The coordinator is --coordinator, else $ATHANOR_COORDINATOR, else "
      << kDefaultCoordinator << ".\n"
         "A list names coordinators sharing their state on etcd: calls go to the one that leads.\n\n"
      << FormatSubcommands(user) << "\n"
      << FormatSubcommands(admin, "admin commands") << "\n"
      << "Calls go over TLS verified against the cluster CA (--ca, else $ATHANOR_CA, else\n"
         "~/.athanor/ca.crt) with your bearer token ($ATHANOR_TOKEN, else --token-file or\n"
         "$ATHANOR_TOKEN_FILE, else ~/.athanor/token; a token file must be mode 0600).\n"
         "Your tenant comes from your token. Without a CA the call is plaintext, for a\n"
         "coordinator started --insecure on loopback, and no token is sent.\n"
         "`athanor COMMAND --help` describes each command; it calls no coordinator.\n";
}

int Main(int argc, char** argv) {
  CliContext ctx;
  const char* env = std::getenv("ATHANOR_COORDINATOR");
  ctx.coordinator = env != nullptr && *env != '\0' ? env : kDefaultCoordinator;
  const char* user = std::getenv("USER");
  ctx.user = user != nullptr ? user : "";
  CliSecurity security;
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (IsHelpFlag(a)) {
      Usage(std::cout);
      return kExitOk;
    } else if (a == "--coordinator" && i + 1 < argc) {
      ctx.coordinator = argv[++i];
    } else if (a.rfind("--coordinator=", 0) == 0) {
      ctx.coordinator = a.substr(14);
    } else if ((a == "--ca" || a == "--token-file") && i + 1 < argc) {
      (a == "--ca" ? security.ca_path : security.token_path) = argv[++i];
    } else if (a.rfind("-", 0) == 0) {
      std::cerr << "athanor: unknown option '" << a << "'\n\n";
      Usage(std::cerr);
      return kExitUsage;
    } else {
      break;
    }
  }
  if (i >= argc) {
    Usage(std::cerr);
    return kExitUsage;
  }
  const Entry* command = nullptr;
  for (const Entry& e : Commands()) {
    if (e.help.name == argv[i]) command = &e;
  }
  if (command == nullptr) {
    std::cerr << "athanor: unknown command '" << argv[i] << "'\n\n";
    Usage(std::cerr);
    return kExitUsage;
  }
  std::vector<std::string> args(argv + i, argv + argc);
  // Help reads no files and makes no channel: each command prints it before
  // it touches ctx.stub or ctx.channel.
  if (AsksForHelp(args)) return command->run(ctx, args);
  // `admin ca` works on files alone (and may be making the CA named by $ATHANOR_CA).
  const bool files_only = args[0] == "admin" && args.size() > 1 && args[1] == "ca";
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      files_only ? grpc::CreateChannel(ctx.coordinator, grpc::InsecureChannelCredentials())
                 : ConnectCoordinator(ctx.coordinator, ResolveCliSecurity(security));
  if (!channel.ok()) {
    std::cerr << "athanor: " << channel.status().message() << "\n";
    return kExitUsage;
  }
  ctx.channel = *channel;
  ctx.stub = rpc::Coordinator::NewStub(ctx.channel);
  return command->run(ctx, args);
}

}  // namespace
}  // namespace athanor::cli

int main(int argc, char** argv) { return athanor::cli::Main(argc, argv); }
