// Typed options parsed once at the edge with Boost.Program_options.
//
// Each program describes its flags, calls ParseOptions, and turns the variables
// map into its own options struct; nothing below main reads flags or getenv.
#pragma once

#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "absl/status/status.h"

namespace athanor {

namespace po = boost::program_options;

struct ParsedCommandLine {
  po::variables_map vars;
  bool help = false;                     // --help was given; usage already printed
  std::vector<std::string> after_dashes;  // everything after a lone "--"
};

// Parses argv against `desc` (a --help flag is added). Unknown flags, missing
// values and bad types come back as InvalidArgument naming the flag.
// `usage` is printed with the flag table for --help.
absl::Status ParseOptions(int argc, const char* const* argv, po::options_description desc,
                          const std::string& usage, ParsedCommandLine* out,
                          const po::positional_options_description* positional = nullptr);

}  // namespace athanor
