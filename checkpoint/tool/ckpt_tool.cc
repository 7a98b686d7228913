#include "checkpoint/tool/ckpt_tool.h"

#include "checkpoint/builtin_stores.h"
#include "checkpoint/catalog.h"
#include "checkpoint/restore.h"
#include "common/options.h"

namespace athanor {

int RunCkptTool(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  po::options_description desc("athanor-ckpt options");
  std::string command, uri, job;
  int64_t step = -1;
  bool json = false;
  desc.add_options()("command", po::value(&command)->required(), "ls | verify")(
      "uri", po::value(&uri)->required(), "store URI (file:///path, s3://bucket/prefix?...)")(
      "job", po::value(&job)->required(), "job name")("step", po::value(&step), "step (verify)")(
      "json", po::bool_switch(&json), "ls: print JSON");
  po::positional_options_description positional;
  positional.add("command", 1).add("uri", 1).add("job", 1).add("step", 1);
  ParsedCommandLine parsed;
  absl::Status status = ParseOptions(argc, argv, desc,
                                     "usage: athanor-ckpt ls URI JOB [--json]\n"
                                     "       athanor-ckpt verify URI JOB STEP",
                                     &parsed, &positional);
  if (!status.ok()) {
    err << "athanor-ckpt: " << status.message() << "\n";
    return 2;
  }
  if (parsed.help) return 0;
  RegisterBuiltinObjectStores();
  auto store = OpenObjectStore(uri);
  if (!store.ok()) {
    err << "athanor-ckpt: " << store.status().ToString() << "\n";
    return 2;
  }
  if (command == "ls") {
    auto steps = ListCommitted(store->get(), job);
    if (!steps.ok()) {
      err << "athanor-ckpt: " << steps.status().ToString() << "\n";
      return 2;
    }
    out << (json ? FormatCommittedJson(*steps) : FormatCommittedTable(*steps));
    return 0;
  }
  if (command == "verify") {
    if (step < 0) {
      err << "athanor-ckpt: verify needs a STEP\n";
      return 2;
    }
    absl::Status verified = VerifyStep(store->get(), job, step);
    if (!verified.ok()) {
      out << "step " << step << ": BAD: " << verified.message() << "\n";
      return 1;
    }
    out << "step " << step << ": OK\n";
    return 0;
  }
  err << "athanor-ckpt: unknown command '" << command << "' (ls, verify)\n";
  return 2;
}

}  // namespace athanor
