// InteractiveService's Shell and KeepInstance (interactive_service.h).
#include "coordinator/rpc/interactive_service.h"

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "coordinator/core/core_commands.h"
#include "coordinator/core/core_reads.h"
#include "coordinator/model/validation.h"
#include "coordinator/rpc/rpc_caller.h"
#include "coordinator/rpc/shell_relay.h"
#include "coordinator/wire/grpc_status.h"
#include "coordinator/wire/proto_convert.h"

namespace athanor::coord {
namespace {

// Typing counts as use at most this often per shell (each mark is a state write).
constexpr absl::Duration kActivityEvery = absl::Seconds(5);
constexpr size_t kMaxCommandArgs = 1024;
constexpr size_t kMaxCommandBytes = 64 << 10;
constexpr int kMaxWindow = 10000;

grpc::Status Invalid(const std::string& what) { return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, what); }

// What a client may send in `open` (the agent checks again).
grpc::Status CheckOpen(const rpc::ShellOpen& open) {
  if (grpc::Status s = ToGrpc(ValidateName("job_id", open.job_id())); !s.ok()) return s;
  if (open.rank() < 0) return Invalid(absl::StrCat("rank: ", open.rank(), " is negative"));
  if (static_cast<size_t>(open.command_size()) > kMaxCommandArgs) return Invalid("command: over 1024 arguments");
  size_t bytes = 0;
  for (const std::string& arg : open.command()) bytes += arg.size() + 1;
  if (bytes > kMaxCommandBytes) return Invalid("command: over 64 KiB");
  if (open.term().size() > 64) return Invalid("term: over 64 bytes");
  if (open.size().rows() < 0 || open.size().rows() > kMaxWindow || open.size().cols() < 0 ||
      open.size().cols() > kMaxWindow) {
    return Invalid("size: rows and cols are 0..10000");
  }
  return grpc::Status::OK;
}

// The caller's job, if its tenant may reach it; another tenant's reads as a
// refusal naming the permission.
grpc::Status AuthorizeJob(const InteractiveService::Deps& deps, const grpc::ServerContextBase& ctx,
                          absl::string_view method, const std::string& job_id, JobRecord* out) {
  absl::StatusOr<Identity> who = AuthorizeCall(deps.auth, ctx, method);
  if (!who.ok()) return ToGrpc(who.status());
  if (grpc::Status s = ToGrpc(ValidateName("job_id", job_id)); !s.ok()) return s;
  absl::StatusOr<JobRecord> job = CoreReads(deps.core).GetJob(job_id);
  if (!job.ok()) return ToGrpc(job.status());
  if (absl::Status owner = deps.auth->CheckOwner(*who, method, AuthTarget{.tenant = job->spec.tenant});
      !owner.ok()) {
    ATHANOR_LOG(WARNING) << method << " of job " << job_id << " refused: " << owner.message();
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        absl::StrCat("permission denied: job ", job_id, " is not your tenant's"));
  }
  *out = std::move(*job);
  return grpc::Status::OK;
}

}  // namespace

grpc::Status InteractiveService::Shell(grpc::ServerContext* ctx,
                                       grpc::ServerReaderWriter<rpc::ShellOutput, rpc::ShellInput>* stream) {
  rpc::ShellInput first;
  if (!stream->Read(&first)) return grpc::Status(grpc::StatusCode::CANCELLED, "no open message");
  if (!first.has_open() || !first.data().empty() || first.eof()) {
    return Invalid("the first message holds `open` alone");
  }
  rpc::ShellOpen open = first.open();
  if (grpc::Status s = CheckOpen(open); !s.ok()) return s;
  JobRecord job;
  if (grpc::Status s = AuthorizeJob(deps_, *ctx, "Interactive.Shell", open.job_id(), &job); !s.ok()) return s;
  if (job.state != JobState::kRunning || job.stopping) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat("job ", job.id, " is ", JobStateName(job.state),
                                     job.stopping ? " (stopping)" : "", ": a shell needs a running job"));
  }
  absl::StatusOr<std::vector<LogTarget>> targets = CoreReads(deps_.core).LogTargets(job.id, open.rank(), 0);
  if (!targets.ok()) return ToGrpc(targets.status());
  if (targets->size() != 1 || targets->front().agent_address.empty()) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        absl::StrCat("rank ", open.rank(), " of job ", job.id, ": its node is not known"));
  }
  const LogTarget& where = targets->front();
  open.set_attempt(where.attempt);
  open.set_tenant(job.spec.tenant);
  const std::string who = Who(deps_.auth, ctx);
  ATHANOR_LOG(INFO) << who << ": shell on job " << job.id << " rank " << open.rank() << " (node " << where.node
                    << ")";

  // Typing is use of an interactive instance (its idle clock starts over).
  absl::Mutex mu;
  absl::Time last_noted = absl::InfinitePast();
  const bool interactive = job.spec.interactive;
  auto on_input = [&] {
    if (!interactive) return;
    {
      absl::MutexLock lock(&mu);
      absl::Time now = absl::Now();
      if (now - last_noted < kActivityEvery) return;
      last_noted = now;
    }
    absl::StatusOr<JobRecord> noted = CoreCommands(deps_.core).NoteActivity(job.id, "shell", "input");
    if (!noted.ok() && !absl::IsFailedPrecondition(noted.status())) {
      ATHANOR_LOG(WARNING) << "shell on job " << job.id << ": cannot note activity: " << noted.status();
    }
  };
  grpc::Status s = RelayShell(ctx, stream, agents_.Stub(where.node, where.agent_address).get(), open, on_input);
  ATHANOR_LOG(INFO) << who << ": shell on job " << job.id << " rank " << open.rank() << " closed"
                    << (s.ok() ? "" : absl::StrCat(": ", s.error_message()));
  return s;
}

grpc::Status InteractiveService::KeepInstance(grpc::ServerContext* ctx, const rpc::KeepInstanceRequest* req,
                                              rpc::Job* resp) {
  JobRecord job;
  if (grpc::Status s = AuthorizeJob(deps_, *ctx, "Interactive.KeepInstance", req->job_id(), &job); !s.ok()) {
    return s;
  }
  absl::StatusOr<JobRecord> kept = CoreCommands(deps_.core).NoteActivity(job.id, "keep", "athanor alloc --keep");
  if (!kept.ok()) return ToGrpc(kept.status());
  ATHANOR_LOG(INFO) << Who(deps_.auth, ctx) << ": kept instance " << job.id;
  ToProto(*kept, resp);
  return grpc::Status::OK;
}

}  // namespace athanor::coord
