// The `athanor` CLI's subcommands. Each parses its own flags (with --help),
// calls the coordinator and prints to stdout; errors go to stderr.
//
// Exit codes (stable, scripts rely on them):
//   0  success (for `wait`: the job SUCCEEDED)
//   1  the coordinator refused or could not be reached (gRPC status printed)
//   2  usage error
//   3  `wait`: the job ended FAILED or CANCELLED (final state printed)
//   124 `wait`: --timeout passed first
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "proto/athanor.grpc.pb.h"

namespace athanor::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitRpcError = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitJobNotSucceeded = 3;
inline constexpr int kExitTimeout = 124;

struct CliContext {
  std::string coordinator;  // HOST:PORT
  std::string user;         // sent as x-athanor-user ($USER)
  std::unique_ptr<rpc::Coordinator::Stub> stub;
  std::shared_ptr<grpc::Channel> channel;  // stub's channel (TLS + token: cli_security.h)
};

// args[0] is the subcommand name.
int RunSubmit(CliContext& ctx, const std::vector<std::string>& args);
int RunJobs(CliContext& ctx, const std::vector<std::string>& args);
int RunJob(CliContext& ctx, const std::vector<std::string>& args);
int RunNodes(CliContext& ctx, const std::vector<std::string>& args);
int RunCancel(CliContext& ctx, const std::vector<std::string>& args);
int RunWait(CliContext& ctx, const std::vector<std::string>& args);
int RunLogs(CliContext& ctx, const std::vector<std::string>& args);
// Admin commands (cli_admin.cc).
int RunPreempt(CliContext& ctx, const std::vector<std::string>& args);
int RunDrain(CliContext& ctx, const std::vector<std::string>& args);
int RunUndrain(CliContext& ctx, const std::vector<std::string>& args);
int RunUsage(CliContext& ctx, const std::vector<std::string>& args);
int RunQuota(CliContext& ctx, const std::vector<std::string>& args);
int RunWhy(CliContext& ctx, const std::vector<std::string>& args);
// `athanor admin status`: where the state lives and who leads (cli_admin.cc).
int RunAdminStatus(CliContext& ctx, const std::vector<std::string>& args);
std::string FormatStateStatus(const rpc::StateStatusResponse& st);
// Interactive allocations (cli_alloc.cc).
int RunAlloc(CliContext& ctx, const std::vector<std::string>& args);
int RunSnapshots(CliContext& ctx, const std::vector<std::string>& args);  // cli_snapshots.cc
int RunAllocKeep(CliContext& ctx, const std::vector<std::string>& args);  // cli_keep.cc
int RunShell(CliContext& ctx, const std::vector<std::string>& args);  // cli_shell.cc
int RunCheckpoints(CliContext& ctx, const std::vector<std::string>& args);  // cli_checkpoints.cc
int RunAdmin(CliContext& ctx, const std::vector<std::string>& args);  // cli_admin_tree.cc
// A tenant's bill and balances (cli_billing.cc).
int RunBill(CliContext& ctx, const std::vector<std::string>& args);
int RunBalance(CliContext& ctx, const std::vector<std::string>& args);
int RunTop(CliContext& ctx, const std::vector<std::string>& args);  // cli_top.cc
int RunImage(CliContext& ctx, const std::vector<std::string>& args);  // cli_image.cc
int RunVolume(CliContext& ctx, const std::vector<std::string>& args);  // cli_volume.cc

}  // namespace athanor::cli
