// The `athanor volume` commands, over the coordinator's Volumes service:
//
//   athanor volume create NAME --size S [--json]
//   athanor volume ls [--tenant T] [--json]
//   athanor volume rm NAME [--tenant T] [--json]
//   athanor volume snapshot NAME SNAPSHOT [--json]
//
// A user's volumes are its tenant's; admins list and remove other tenants'
// (--tenant). Jobs mount them with `submit --volume NAME:/path[:ro]`.
#include "launcher/cli_volume.h"

#include <iostream>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "launcher/cli_admin_tree.h"
#include "launcher/cli_commands.h"
#include "launcher/cli_format.h"
#include "launcher/cli_util.h"
#include "proto/athanor_data.grpc.pb.h"

namespace athanor::cli {

absl::StatusOr<int64_t> ParseSize(const std::string& what, const std::string& text) {
  const auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": '", text.substr(0, 64), "' is not a size (bytes, or a whole number with K, M, G, T or P: 10G, 512M)"));
  };
  size_t digits = 0;
  while (digits < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits > 19) return bad();
  uint64_t n = 0;
  if (!absl::SimpleAtoi(text.substr(0, digits), &n)) return bad();
  std::string unit = absl::AsciiStrToUpper(text.substr(digits));
  if (absl::EndsWith(unit, "B")) unit.pop_back();
  if (absl::EndsWith(unit, "I")) unit.pop_back();
  int shift = 0;
  if (unit == "K") shift = 10;
  else if (unit == "M") shift = 20;
  else if (unit == "G") shift = 30;
  else if (unit == "T") shift = 40;
  else if (unit == "P") shift = 50;
  else if (!unit.empty() || text.size() != digits) return bad();
  constexpr uint64_t kMax = uint64_t{1} << 62;
  if (n == 0 || n > (kMax >> shift)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": '", text.substr(0, 64), "' must be above 0 and at most 4 EiB"));
  }
  return static_cast<int64_t>(n << shift);
}

std::string FormatSize(int64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  double v = static_cast<double>(bytes);
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  if (u == 0) return absl::StrCat(bytes, " B");
  std::string s = absl::StrFormat("%.1f", v);
  if (absl::EndsWith(s, ".0")) s.resize(s.size() - 2);
  return absl::StrCat(s, " ", kUnits[u]);
}

std::string FormatVolumes(const rpc::ListVolumesResponse& resp) {
  std::vector<std::vector<std::string>> rows = {
      {"NAME", "TENANT", "SIZE", "USED", "GENERATION", "SYNCED", "SNAPSHOTS", "USED-BY"}};
  for (const rpc::Volume& v : resp.volumes()) {
    std::vector<std::string> snapshots;
    for (const rpc::VolumeSnapshot& s : v.snapshots()) snapshots.push_back(s.name());
    rows.push_back({v.name(), v.tenant(), FormatSize(v.size_limit_bytes()), FormatSize(v.used_bytes()),
                    std::to_string(v.generation()), v.synced_unix() == 0 ? "never" : FormatUnixTime(v.synced_unix()),
                    snapshots.empty() ? "-" : absl::StrJoin(snapshots, ","),
                    v.used_by().empty() ? "-" : absl::StrJoin(v.used_by(), ",")});
  }
  return FormatTable(rows);
}

namespace {

const Subcommand kCreate{"create", "NAME --size S [--json]", "make an empty volume of at most S (10G, 512M)"};
const Subcommand kList{"ls", "[--tenant T] [--json]", "list your volumes"};
const Subcommand kRemove{"rm", "NAME [--tenant T] [--json]", "remove a volume and its content"};
const Subcommand kSnapshot{"snapshot", "NAME SNAPSHOT [--json]", "keep the volume's current content under a name"};

std::string VolumeUsage(const Subcommand& verb) {
  std::string what = verb.summary;
  if (!what.empty()) what[0] = static_cast<char>(toupper(what[0]));
  return absl::StrCat("usage: athanor volume ", verb.name, " ", verb.synopsis, "\n", what, ".");
}

std::string FormatVolume(const rpc::Volume& v) {
  return absl::StrCat(EscapeControls(v.tenant()), "/", EscapeControls(v.name()), ": ", FormatSize(v.size_limit_bytes()),
                      ", ", FormatSize(v.used_bytes()), " used, generation ", v.generation(), "\n");
}

// Calls `method` of the Volumes service and prints the Volume it returns.
template <typename Request>
int CallVolumes(const std::string& cmd, const CliContext& ctx,
                grpc::Status (rpc::Volumes::Stub::*method)(grpc::ClientContext*, const Request&, rpc::Volume*),
                const Request& req, bool json, const std::string& prefix) {
  std::unique_ptr<rpc::Volumes::Stub> stub = rpc::Volumes::NewStub(ctx.channel);
  grpc::ClientContext c;
  PrepareCall(ctx, &c);
  rpc::Volume out;
  if (grpc::Status s = ((*stub).*method)(&c, req, &out); !s.ok()) return RpcError(cmd, ctx, s);
  std::cout << (json ? ToJson(out) : prefix + FormatVolume(out));
  return kExitOk;
}

int RunCreate(CliContext& ctx, const std::vector<std::string>& args) {
  std::string name, size;
  bool json = false;
  po::options_description desc("options");
  desc.add_options()
      ("name", po::value(&name)->required(), "the volume's name: [A-Za-z0-9._-], at most 128 bytes")
      ("size", po::value(&size)->required(), "the most it may hold: bytes, or with K, M, G, T (10G, 512M)")
      ("json", po::bool_switch(&json), "print the Volume as JSON");
  po::positional_options_description pos = FirstOperand("name");
  ParsedCommandLine cmd;
  if (int rc = ParseFlags(args, desc, VolumeUsage(kCreate), &cmd, &pos); rc >= 0) return rc;
  absl::StatusOr<int64_t> bytes = ParseSize("--size", size);
  if (!bytes.ok()) return UsageError(args[0], std::string(bytes.status().message()));
  rpc::CreateVolumeRequest req;
  req.set_name(name);
  req.set_size_limit_bytes(*bytes);
  return CallVolumes(args[0], ctx, &rpc::Volumes::Stub::CreateVolume, req, json, "created ");
}

int RunList(CliContext& ctx, const std::vector<std::string>& args) {
  std::string tenant;
  bool json = false;
  po::options_description desc("options");
  desc.add_options()
      ("tenant", po::value(&tenant), "one tenant's volumes (admins; without it an admin sees every tenant's)")
      ("json", po::bool_switch(&json), "print the ListVolumesResponse as JSON");
  ParsedCommandLine cmd;
  if (int rc = ParseFlags(args, desc, VolumeUsage(kList), &cmd); rc >= 0) return rc;
  std::unique_ptr<rpc::Volumes::Stub> stub = rpc::Volumes::NewStub(ctx.channel);
  grpc::ClientContext c;
  PrepareCall(ctx, &c);
  rpc::ListVolumesRequest req;
  req.set_tenant(tenant);
  rpc::ListVolumesResponse resp;
  if (grpc::Status s = stub->ListVolumes(&c, req, &resp); !s.ok()) return RpcError(args[0], ctx, s);
  std::cout << (json ? ToJson(resp) : FormatVolumes(resp));
  return kExitOk;
}

int RunRemove(CliContext& ctx, const std::vector<std::string>& args) {
  std::string name, tenant;
  bool json = false;
  po::options_description desc("options");
  desc.add_options()
      ("name", po::value(&name)->required(), "the volume's name")
      ("tenant", po::value(&tenant), "another tenant's volume (admins)")
      ("json", po::bool_switch(&json), "print the removed Volume as JSON");
  po::positional_options_description pos = FirstOperand("name");
  ParsedCommandLine cmd;
  if (int rc = ParseFlags(args, desc, VolumeUsage(kRemove), &cmd, &pos); rc >= 0) return rc;
  rpc::RemoveVolumeRequest req;
  req.set_name(name);
  req.set_tenant(tenant);
  return CallVolumes(args[0], ctx, &rpc::Volumes::Stub::RemoveVolume, req, json, "removed ");
}

int RunSnapshot(CliContext& ctx, const std::vector<std::string>& args) {
  std::string name, snapshot;
  bool json = false;
  po::options_description desc("options");
  desc.add_options()
      ("name", po::value(&name)->required(), "the volume's name")
      ("snapshot", po::value(&snapshot)->required(), "the snapshot's name: [A-Za-z0-9._-], at most 128 bytes")
      ("json", po::bool_switch(&json), "print the Volume as JSON");
  po::positional_options_description pos;
  pos.add("name", 1).add("snapshot", 1);
  ParsedCommandLine cmd;
  if (int rc = ParseFlags(args, desc, VolumeUsage(kSnapshot), &cmd, &pos); rc >= 0) return rc;
  rpc::SnapshotVolumeRequest req;
  req.set_name(name);
  req.set_snapshot(snapshot);
  return CallVolumes(args[0], ctx, &rpc::Volumes::Stub::SnapshotVolume, req, json, "snapshot " + snapshot + " of ");
}

struct Verb {
  const Subcommand* help;
  int (*run)(CliContext&, const std::vector<std::string>&);
};
constexpr Verb kVerbs[] = {{&kCreate, RunCreate}, {&kList, RunList}, {&kRemove, RunRemove}, {&kSnapshot, RunSnapshot}};

std::string VolumeHelp() {
  std::vector<Subcommand> list;
  for (const Verb& v : kVerbs) list.push_back(*v.help);
  return absl::StrCat(
      "usage: athanor volume VERB [ARGS...]\n"
      "Persistent volumes of your tenant, kept in the cluster's data store. A job mounts one with\n"
      "`athanor submit --volume NAME:/path[:ro]`: copied to the node before its ranks start, and\n"
      "(read-write, a job of one node) copied back when they end. A volume has one read-write\n"
      "job at a time; read-only mounts may be shared.\n\n",
      FormatSubcommands(list), "\n`athanor volume VERB --help` describes one.\n");
}

}  // namespace

int RunVolume(CliContext& ctx, const std::vector<std::string>& args) {
  if (args.size() < 2) {
    std::cerr << VolumeHelp();
    return kExitUsage;
  }
  if (IsHelpFlag(args[1])) {
    std::cout << VolumeHelp();
    return kExitOk;
  }
  for (const Verb& v : kVerbs) {
    if (v.help->name != args[1]) continue;
    std::vector<std::string> rest(args.begin() + 1, args.end());
    rest[0] = "volume " + v.help->name;
    return v.run(ctx, rest);
  }
  return UsageError("volume", "expected create, ls, rm or snapshot, got '" + args[1] + "'");
}

}  // namespace athanor::cli
