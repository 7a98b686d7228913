// The `athanor image` commands, over the coordinator's Images service:
//
//   athanor image import NAME SOURCE [--public] [--replace] [--json]
//   athanor image ls [--tenant T] [--json]
//   athanor image rm NAME [--tenant T] [--json]
//
// A user's images are its tenant's; admins publish (--public) and name other
// tenants (--tenant). SOURCE is made into the canonical root-filesystem tar
// first (cli_image_source.h), then streamed in pieces of 1 MiB with progress
// on stderr.
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "launcher/cli_admin_tree.h"
#include "launcher/cli_commands.h"
#include "launcher/cli_format.h"
#include "launcher/cli_image_source.h"
#include "launcher/cli_util.h"
#include "proto/athanor_data.grpc.pb.h"

namespace athanor::cli {
namespace {

constexpr size_t kChunkBytes = 1 << 20;  // the service's limit per message
// An import may move tens of GiB: its call gets a day.
constexpr int kImportDeadlineS = 24 * 3600;

const Subcommand kImport{"import", "NAME SOURCE [--public] [--replace] [--json]",
                         "import an image from an OCI layout, a docker archive or a root-filesystem tar"};
const Subcommand kList{"ls", "[--tenant T] [--json]", "list the images you may run"};
const Subcommand kRemove{"rm", "NAME [--tenant T] [--json]", "remove an image"};

std::string ImageUsage(const Subcommand& verb) {
  std::string what = verb.summary;
  if (!what.empty()) what[0] = static_cast<char>(toupper(what[0]));
  return absl::StrCat("usage: athanor image ", verb.name, " ", verb.synopsis, "\n", what, ".");
}

std::string FormatImages(const rpc::ListImagesResponse& resp) {
  std::vector<std::vector<std::string>> rows = {{"NAME", "TENANT", "DIGEST", "SIZE", "PUBLIC", "CREATED", "SOURCE"}};
  for (const rpc::Image& i : resp.images()) {
    rows.push_back({EscapeControls(i.name()), EscapeControls(i.tenant()), i.digest().substr(0, 19),
                    std::to_string(i.size_bytes()), i.public_() ? "yes" : "no", FormatUnixTime(i.created_unix()),
                    EscapeControls(i.source())});
  }
  return FormatTable(rows);
}

std::string FormatImage(const rpc::Image& i) {
  return absl::StrCat(EscapeControls(i.tenant()), "/", EscapeControls(i.name()), " ", i.digest(), " ",
                      i.size_bytes(), " bytes", i.public_() ? " (public)" : "", "\n");
}

// Streams the tar at `tar_path` after `header`; progress on stderr.
grpc::Status Upload(const CliContext& ctx, const std::string& tar_path, const rpc::ImportImageHeader& header,
                    rpc::Image* out) {
  std::ifstream in(tar_path, std::ios::binary);
  if (!in) return grpc::Status(grpc::StatusCode::INTERNAL, "cannot read " + tar_path);
  std::unique_ptr<rpc::Images::Stub> stub = rpc::Images::NewStub(ctx.channel);
  grpc::ClientContext c;
  PrepareCall(ctx, &c, kImportDeadlineS);
  std::unique_ptr<grpc::ClientWriter<rpc::ImportImageChunk>> writer = stub->ImportImage(&c, out);
  rpc::ImportImageChunk chunk;
  *chunk.mutable_header() = header;
  bool open = writer->Write(chunk);
  const bool tty = isatty(STDERR_FILENO) != 0;
  const int64_t total = header.size_bytes();
  int64_t sent = 0;
  int last_tenth = -1;
  std::string buf(kChunkBytes, '\0');
  while (open && sent < total) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const std::streamsize n = in.gcount();
    if (n <= 0) break;
    rpc::ImportImageChunk piece;
    piece.set_data(buf.data(), static_cast<size_t>(n));
    open = writer->Write(piece);
    sent += n;
    // On a terminal, a line redrawn each piece; elsewhere every tenth.
    const int tenth = static_cast<int>(sent * 10 / total);
    if (tty || tenth != last_tenth) {
      std::cerr << (tty ? "\r" : "") << "athanor image import: sent " << sent << " / " << total << " bytes"
                << (tty ? "" : "\n") << std::flush;
      last_tenth = tenth;
    }
  }
  if (tty) std::cerr << "\n";
  writer->WritesDone();
  return writer->Finish();
}

int RunImport(CliContext& ctx, const std::vector<std::string>& args) {
  std::string name, source;
  bool is_public = false, replace = false, json = false;
  po::options_description desc("options");
  desc.add_options()
      ("name", po::value(&name)->required(), "the image's name: [A-Za-z0-9._-], at most 128 bytes")
      ("source", po::value(&source)->required(),
       "oci:DIR[:REF] (an OCI layout), docker-archive:FILE (`docker save`), or a root filesystem as a "
       ".tar or .tar.gz")
      ("public", po::bool_switch(&is_public), "every tenant may run it (admins only)")
      ("replace", po::bool_switch(&replace), "the name may already name one of your images")
      ("json", po::bool_switch(&json), "print the Image as JSON");
  po::positional_options_description pos;
  pos.add("name", 1).add("source", 1);
  ParsedCommandLine cmd;
  if (int rc = ParseFlags(args, desc, ImageUsage(kImport), &cmd, &pos); rc >= 0) return rc;
  absl::StatusOr<ImageSource> parsed = ParseImageSource(source);
  if (!parsed.ok()) return UsageError(args[0], std::string(parsed.status().message()));
  absl::StatusOr<std::string> work = MakeWorkDir();
  if (!work.ok()) {
    std::cerr << "athanor " << args[0] << ": " << work.status().message() << "\n";
    return kExitRpcError;
  }
  const std::string tar_path = *work + "/image.tar";
  absl::StatusOr<storage::PackResult> packed = BuildImageTar(*parsed, *work, tar_path);
  int rc = kExitOk;
  if (!packed.ok()) {
    std::cerr << "athanor " << args[0] << ": " << source << ": " << packed.status().message() << "\n";
    rc = kExitRpcError;
  } else {
    rpc::ImportImageHeader header;
    header.set_name(name);
    header.set_public_(is_public);
    header.set_size_bytes(packed->bytes);
    header.set_digest(packed->digest);
    header.set_source(source);
    header.set_replace(replace);
    rpc::Image image;
    grpc::Status s = Upload(ctx, tar_path, header, &image);
    if (!s.ok()) {
      rc = RpcError(args[0], ctx, s);
    } else {
      std::cout << (json ? ToJson(image) : FormatImage(image));
    }
  }
  RemoveWorkDir(*work);
  return rc;
}

int RunList(CliContext& ctx, const std::vector<std::string>& args) {
  std::string tenant;
  bool json = false;
  po::options_description desc("options");
  desc.add_options()
      ("tenant", po::value(&tenant), "one tenant's images (admins; a user may name its own)")
      ("json", po::bool_switch(&json), "print the ListImagesResponse as JSON");
  ParsedCommandLine cmd;
  if (int rc = ParseFlags(args, desc, ImageUsage(kList), &cmd); rc >= 0) return rc;
  std::unique_ptr<rpc::Images::Stub> stub = rpc::Images::NewStub(ctx.channel);
  grpc::ClientContext c;
  PrepareCall(ctx, &c);
  rpc::ListImagesRequest req;
  req.set_tenant(tenant);
  rpc::ListImagesResponse resp;
  if (grpc::Status s = stub->ListImages(&c, req, &resp); !s.ok()) return RpcError(args[0], ctx, s);
  std::cout << (json ? ToJson(resp) : FormatImages(resp));
  return kExitOk;
}

int RunRemove(CliContext& ctx, const std::vector<std::string>& args) {
  std::string name, tenant;
  bool json = false;
  po::options_description desc("options");
  desc.add_options()
      ("name", po::value(&name)->required(), "the image's name")
      ("tenant", po::value(&tenant), "another tenant's image (admins)")
      ("json", po::bool_switch(&json), "print the removed Image as JSON");
  po::positional_options_description pos = FirstOperand("name");
  ParsedCommandLine cmd;
  if (int rc = ParseFlags(args, desc, ImageUsage(kRemove), &cmd, &pos); rc >= 0) return rc;
  std::unique_ptr<rpc::Images::Stub> stub = rpc::Images::NewStub(ctx.channel);
  grpc::ClientContext c;
  PrepareCall(ctx, &c);
  rpc::RemoveImageRequest req;
  req.set_name(name);
  req.set_tenant(tenant);
  rpc::Image removed;
  if (grpc::Status s = stub->RemoveImage(&c, req, &removed); !s.ok()) return RpcError(args[0], ctx, s);
  std::cout << (json ? ToJson(removed) : "removed " + FormatImage(removed));
  return kExitOk;
}

struct Verb {
  const Subcommand* help;
  int (*run)(CliContext&, const std::vector<std::string>&);
};
constexpr Verb kVerbs[] = {{&kImport, RunImport}, {&kList, RunList}, {&kRemove, RunRemove}};

std::string ImageHelp() {
  std::vector<Subcommand> list;
  for (const Verb& v : kVerbs) list.push_back(*v.help);
  return absl::StrCat(
      "usage: athanor image VERB [ARGS...]\n"
      "Environment images: root filesystems your jobs run in (`athanor submit --image NAME`).\n"
      "A job runs your own image of that name, else a public one.\n\n",
      FormatSubcommands(list), "\n`athanor image VERB --help` describes one.\n");
}

}  // namespace

int RunImage(CliContext& ctx, const std::vector<std::string>& args) {
  if (args.size() < 2) {
    std::cerr << ImageHelp();
    return kExitUsage;
  }
  if (IsHelpFlag(args[1])) {
    std::cout << ImageHelp();
    return kExitOk;
  }
  for (const Verb& v : kVerbs) {
    if (v.help->name != args[1]) continue;
    std::vector<std::string> rest(args.begin() + 1, args.end());
    rest[0] = "image " + v.help->name;
    return v.run(ctx, rest);
  }
  return UsageError("image", "expected import, ls or rm, got '" + args[1] + "'");
}

}  // namespace athanor::cli
