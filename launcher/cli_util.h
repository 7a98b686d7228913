// Helpers shared by the `athanor` CLI's subcommands: flag parsing, gRPC call
// setup (deadline + the caller's identity) and value parsers. Pure except
// for writing usage errors to stderr; thread-compatible.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "common/options.h"
#include "launcher/cli_commands.h"
#include "launcher/cli_parse.h"

namespace athanor::cli {

// Parses a subcommand's flags. Returns -1 to go on, else the exit code
// (0 after --help, kExitUsage after an error printed to stderr).
int ParseFlags(const std::vector<std::string>& args, po::options_description desc,
               const std::string& usage, ParsedCommandLine* out,
               const po::positional_options_description* positional = nullptr);

// Prints "athanor WHAT: message (CODE, coordinator ADDR)"; returns kExitRpcError.
int RpcError(const std::string& what, const CliContext& ctx, const grpc::Status& s);

// Sets the deadline and the x-athanor-user metadata (ctx.user).
void PrepareCall(const CliContext& ctx, grpc::ClientContext* c, int deadline_s = 10);

// A fresh random idempotency key (32 hex digits) for a submission.
std::string NewIdempotencyKey();

// Sets the job's image and its --volume mounts on `spec`; false (after
// printing why, as "athanor VERB: ...") when a --volume is malformed.
bool SetEnvironment(const std::string& verb, const std::string& image, const std::vector<std::string>& volumes,
                    rpc::JobSpec* spec);

// SubmitJob that survives a lost reply: while the coordinator is unreachable
// or does not answer in time, retries the same request (the same idempotency
// key) with backoff, for up to `attempts` tries. A retry of a submission that
// had been accepted returns the first job.
grpc::Status SubmitWithRetry(const CliContext& ctx, const rpc::SubmitJobRequest& req,
                             rpc::SubmitJobResponse* resp, int attempts = 5);

// GetJob for `id` into *job, with PrepareCall's deadline and identity.
grpc::Status FetchJob(const CliContext& ctx, const std::string& id, rpc::Job* job,
                      int deadline_s = 10);

}  // namespace athanor::cli
