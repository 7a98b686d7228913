// athanor-run: start N local ranks of any program with the env contract
//   athanor-run --nproc N [--job-id ID] -- CMD [ARGS...]
// or, under `mpirun -np N athanor-run -- CMD`, give each mpirun process the
// contract and exec CMD.
#include <iostream>

#include "common/logging.h"
#include "common/options.h"
#include "launcher/run/local_launcher.h"
#include "launcher/run/mpi_env.h"

int main(int argc, char** argv) {
  using namespace athanor;
  LocalLaunchOptions options;
  double grace_s = 5.0;
  po::options_description desc("athanor-run options");
  desc.add_options()("nproc", po::value(&options.nproc)->default_value(1), "local ranks to start")(
      "job-id", po::value(&options.job_id)->default_value("local"), "ATHANOR_JOB_ID for the ranks")(
      "master-port", po::value(&options.master_port)->default_value(0),
      "MASTER_PORT (0: pick a free one)")("grace-s", po::value(&grace_s)->default_value(5.0, "5"),
                                          "seconds between SIGTERM and SIGKILL");
  ParsedCommandLine parsed;
  absl::Status s = ParseOptions(argc, argv, desc,
                                "usage: athanor-run --nproc N -- CMD [ARGS...]\n"
                                "       mpirun -np N athanor-run -- CMD [ARGS...]",
                                &parsed);
  if (!s.ok()) {
    std::cerr << "athanor-run: " << s.message() << std::endl;
    return 2;
  }
  if (parsed.help) return 0;
  options.command = parsed.after_dashes;
  options.grace = std::chrono::milliseconds(static_cast<int64_t>(grace_s * 1000));
  if (StartedByMpirun()) {
    s = ExecWithMpiContract(options.command, options.job_id);
    std::cerr << "athanor-run: " << s.ToString() << std::endl;
    return 127;
  }
  absl::StatusOr<int> code = RunLocalRanks(options);
  if (!code.ok()) {
    std::cerr << "athanor-run: " << code.status().ToString() << std::endl;
    return 127;
  }
  return *code;
}
