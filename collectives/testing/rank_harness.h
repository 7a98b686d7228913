// Runs N ranks of a collective test, as threads in this process or as forked
// processes, each with its own Communicator built by CreateCommunicator.
//
// The forked form gives every child PR_SET_PDEATHSIG and the parent a
// watchdog: a rank that hangs past `watchdog` is SIGKILLed and reported.
// Children exit only once every rank has reported, so that one rank leaving
// after an error cannot change what the others observe.
// Results come back as one Status per rank (a child reports through its exit
// code and a pipe). Blocking; call from the test's main thread.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "collectives/factory.h"

namespace athanor {

using RankBody = std::function<absl::Status(int rank, Communicator* comm)>;

struct HarnessOptions {
  std::string backend = "ucx";
  int world_size = 2;
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};  // bootstrap + op timeout
  std::chrono::seconds watchdog{90};                             // forked form only
  // Builds each rank's communicator; CreateCommunicator when empty.
  std::function<absl::StatusOr<std::unique_ptr<Communicator>>(const CommunicatorOptions&)> create;
};

// Every rank's result; the i-th element is rank i's.
std::vector<absl::Status> RunRanksAsThreads(const HarnessOptions& options, const RankBody& body);
std::vector<absl::Status> RunRanksAsProcesses(const HarnessOptions& options, const RankBody& body);

}  // namespace athanor
