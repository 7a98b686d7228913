// `athanor snapshots`: the instance snapshots reclaimed interactive
// allocations left, over the coordinator's Interactive service:
//
//   athanor snapshots [--tenant T] [--json]
//   athanor snapshots rm ID [--json]
//
// A user's are its tenant's; admins see every tenant's (or --tenant's).
// `athanor alloc --restore ID` / `--resume JOB` start from one.
#include "launcher/cli_snapshots.h"

#include <iostream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "launcher/cli_admin_tree.h"
#include "launcher/cli_format.h"
#include "launcher/cli_util.h"
#include "launcher/cli_volume.h"
#include "proto/athanor_interactive.grpc.pb.h"

namespace athanor::cli {

absl::StatusOr<rpc::InstanceSnapshot> FindSnapshot(const CliContext& ctx, const std::string& restore,
                                                   const std::string& resume) {
  std::unique_ptr<rpc::Interactive::Stub> stub = rpc::Interactive::NewStub(ctx.channel);
  grpc::ClientContext c;
  PrepareCall(ctx, &c);
  rpc::ListSnapshotsResponse resp;
  if (grpc::Status s = stub->ListSnapshots(&c, rpc::ListSnapshotsRequest(), &resp); !s.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                        absl::StrCat("cannot list snapshots: ", s.error_message()));
  }
  const rpc::InstanceSnapshot* out = nullptr;
  for (const rpc::InstanceSnapshot& s : resp.snapshots()) {  // oldest first
    if (!restore.empty() && s.id() == restore) out = &s;
    if (restore.empty() && s.job_id() == resume && s.complete()) out = &s;
  }
  if (out == nullptr) {
    return absl::NotFoundError(restore.empty() ? absl::StrCat("job ", resume, " left no complete snapshot")
                                               : absl::StrCat("no snapshot '", restore, "'"));
  }
  return *out;
}

void FillFromSnapshot(const rpc::InstanceSnapshot& snapshot, rpc::JobSpec* spec) {
  const rpc::JobSpec& was = snapshot.spec();
  if (spec->nodes() == 0) spec->set_nodes(was.nodes() > 0 ? was.nodes() : 1);
  if (spec->gpus_per_node() == 0) spec->set_gpus_per_node(was.gpus_per_node() > 0 ? was.gpus_per_node() : 1);
  if (spec->image().empty()) spec->set_image(was.image());
  if (spec->volumes().empty()) {
    for (const rpc::VolumeSnapshotRef& v : snapshot.volumes()) {
      rpc::VolumeMount* m = spec->add_volumes();
      m->set_name(v.volume());
      m->set_path(v.path());
      m->set_read_only(v.read_only());
    }
  }
  if (spec->idle_timeout_s() == 0) spec->set_idle_timeout_s(was.idle_timeout_s());
  if (spec->command().empty() && !spec->notebook()) {
    if (was.notebook()) {
      spec->set_notebook(true);
    } else {
      *spec->mutable_command() = was.command();
    }
  }
  spec->set_restore_snapshot(snapshot.id());
}

std::string FormatSnapshots(const rpc::ListSnapshotsResponse& resp) {
  std::vector<std::vector<std::string>> rows = {
      {"ID", "TENANT", "JOB", "CREATED", "SIZE", "COMPLETE", "VOLUMES"}};
  for (const rpc::InstanceSnapshot& s : resp.snapshots()) {
    std::vector<std::string> volumes;
    for (const rpc::VolumeSnapshotRef& v : s.volumes()) {
      volumes.push_back(absl::StrCat(v.volume(), ":", v.path(), v.read_only() ? ":ro" : ""));
    }
    rows.push_back({s.id(), s.tenant(), s.job_id(), FormatUnixTime(s.created_unix()), FormatSize(s.size_bytes()),
                    s.complete() ? "yes" : "no", volumes.empty() ? "-" : absl::StrJoin(volumes, ",")});
  }
  return FormatTable(rows);
}

namespace {

constexpr char kUsage[] =
    "usage: athanor snapshots [--tenant T] [--json]\n"
    "       athanor snapshots rm ID [--json]\n"
    "The instance snapshots your reclaimed interactive allocations left: each rank's work dir\n"
    "and the read-write volumes as the instance left them. `athanor alloc --restore ID` or\n"
    "`athanor alloc --resume JOB` starts a new instance from one; the oldest go past the\n"
    "coordinator's --snapshot-keep.";

int RunRemove(CliContext& ctx, const std::vector<std::string>& args) {
  std::string id;
  bool json = false;
  po::options_description desc("options");
  desc.add_options()
      ("id", po::value(&id)->required(), "the snapshot's id (snap-JOB-N)")
      ("json", po::bool_switch(&json), "print the removed InstanceSnapshot as JSON");
  po::positional_options_description pos = FirstOperand("id");
  ParsedCommandLine cmd;
  if (int rc = ParseFlags(args, desc, kUsage, &cmd, &pos); rc >= 0) return rc;
  std::unique_ptr<rpc::Interactive::Stub> stub = rpc::Interactive::NewStub(ctx.channel);
  grpc::ClientContext c;
  PrepareCall(ctx, &c);
  rpc::DeleteSnapshotRequest req;
  req.set_id(id);
  rpc::InstanceSnapshot out;
  if (grpc::Status s = stub->DeleteSnapshot(&c, req, &out); !s.ok()) return RpcError(args[0], ctx, s);
  std::cout << (json ? ToJson(out) : absl::StrCat("removed ", out.id(), "\n"));
  return kExitOk;
}

}  // namespace

int RunSnapshots(CliContext& ctx, const std::vector<std::string>& args) {
  if (args.size() >= 2 && args[1] == "rm") {
    std::vector<std::string> rest(args.begin() + 1, args.end());
    rest[0] = "snapshots rm";
    return RunRemove(ctx, rest);
  }
  std::string tenant;
  bool json = false;
  po::options_description desc("options");
  desc.add_options()
      ("tenant", po::value(&tenant), "one tenant's snapshots (admins; without it an admin sees every tenant's)")
      ("json", po::bool_switch(&json), "print the ListSnapshotsResponse as JSON");
  ParsedCommandLine cmd;
  if (int rc = ParseFlags(args, desc, kUsage, &cmd); rc >= 0) return rc;
  std::unique_ptr<rpc::Interactive::Stub> stub = rpc::Interactive::NewStub(ctx.channel);
  grpc::ClientContext c;
  PrepareCall(ctx, &c);
  rpc::ListSnapshotsRequest req;
  req.set_tenant(tenant);
  rpc::ListSnapshotsResponse resp;
  if (grpc::Status s = stub->ListSnapshots(&c, req, &resp); !s.ok()) return RpcError(args[0], ctx, s);
  std::cout << (json ? ToJson(resp) : FormatSnapshots(resp));
  return kExitOk;
}

}  // namespace athanor::cli
