#include "common/options.h"

#include <iostream>

#include "absl/strings/str_cat.h"

namespace athanor {

absl::Status ParseOptions(int argc, const char* const* argv, po::options_description desc,
                          const std::string& usage, ParsedCommandLine* out,
                          const po::positional_options_description* positional) {
  desc.add_options()("help,h", "show this help and exit");
  std::vector<std::string> before;
  int i = 1;
  for (; i < argc; ++i) {
    if (std::string(argv[i]) == "--") {
      ++i;
      break;
    }
    before.emplace_back(argv[i]);
  }
  for (; i < argc; ++i) out->after_dashes.emplace_back(argv[i]);
  try {
    po::command_line_parser parser(before);
    parser.options(desc);
    if (positional != nullptr) parser.positional(*positional);
    po::store(parser.run(), out->vars);
    if (out->vars.count("help")) {
      std::cout << usage << "\n\n" << desc << std::endl;
      out->help = true;
      return absl::OkStatus();
    }
    po::notify(out->vars);
  } catch (const po::error& e) {
    return absl::InvalidArgumentError(absl::StrCat(e.what(), " (see --help)"));
  }
  return absl::OkStatus();
}

}  // namespace athanor
