#include "collectives/testing/rank_harness.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "common/net.h"
#include "common/subprocess.h"
#include "common/status.h"

namespace athanor {
namespace {

CommunicatorOptions MakeOptions(const HarnessOptions& h, int rank, int port) {
  CommunicatorOptions o;
  o.backend = h.backend;
  o.rank = rank;
  o.world_size = h.world_size;
  o.master_port = port;
  o.timeout = h.timeout;
  return o;
}

absl::Status RunOne(const HarnessOptions& h, int rank, int port, const RankBody& body) {
  CommunicatorOptions o = MakeOptions(h, rank, port);
  auto comm = h.create ? h.create(o) : CreateCommunicator(o);
  if (!comm.ok()) return comm.status();
  return body(rank, comm->get());
}

}  // namespace

std::vector<absl::Status> RunRanksAsThreads(const HarnessOptions& h, const RankBody& body) {
  std::vector<absl::Status> results(h.world_size);
  auto port = PickFreePort();
  if (!port.ok()) return std::vector<absl::Status>(h.world_size, port.status());
  std::vector<std::thread> threads;
  for (int r = 0; r < h.world_size; ++r) {
    threads.emplace_back([&, r] { results[r] = RunOne(h, r, *port, body); });
  }
  for (auto& t : threads) t.join();
  return results;
}

std::vector<absl::Status> RunRanksAsProcesses(const HarnessOptions& h, const RankBody& body) {
  std::vector<absl::Status> results(h.world_size);
  auto port = PickFreePort();
  if (!port.ok()) return std::vector<absl::Status>(h.world_size, port.status());
  std::vector<pid_t> pids(h.world_size);
  std::vector<int> pipes(h.world_size);
  // Children stay alive until every rank has reported (EOF on this pipe), so
  // one rank exiting after an error never masks the failure the others see.
  int release[2];
  if (pipe(release) != 0) return std::vector<absl::Status>(h.world_size, ErrnoStatus("pipe"));
  for (int r = 0; r < h.world_size; ++r) {
    int fds[2];
    if (pipe(fds) != 0) return std::vector<absl::Status>(h.world_size, ErrnoStatus("pipe"));
    pid_t pid = fork();
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      close(fds[0]);
      close(release[1]);
      // The communicator outlives the report: closing it early would look
      // like a failure to the ranks still running.
      CommunicatorOptions o = MakeOptions(h, r, *port);
      auto comm = h.create ? h.create(o) : CreateCommunicator(o);
      absl::Status s = comm.ok() ? body(r, comm->get()) : comm.status();
      std::string text = absl::StrCat(static_cast<int>(s.code()), ":", s.message());
      (void)!write(fds[1], text.data(), text.size());
      close(fds[1]);
      char c;
      while (read(release[0], &c, 1) < 0 && errno == EINTR) {
      }
      if (comm.ok()) comm->reset();
      _exit(s.ok() ? 0 : 1);
    }
    close(fds[1]);
    pids[r] = pid;
    pipes[r] = fds[0];
  }
  // Collect every report; a child that stays silent past the watchdog is killed.
  auto deadline = std::chrono::steady_clock::now() + h.watchdog;
  std::vector<std::string> reports(h.world_size);
  std::vector<bool> open(h.world_size, true);
  int remaining = h.world_size;
  while (remaining > 0) {
    std::vector<pollfd> fds;
    for (int r = 0; r < h.world_size; ++r) {
      if (open[r]) fds.push_back({pipes[r], POLLIN, static_cast<short>(r)});
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    int n = left.count() > 0 ? poll(fds.data(), fds.size(), left.count()) : 0;
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (auto& p : fds) {
      if (!p.revents) continue;
      int r = 0;
      for (int k = 0; k < h.world_size; ++k) {
        if (open[k] && pipes[k] == p.fd) r = k;
      }
      char buf[1024];
      ssize_t got = read(p.fd, buf, sizeof(buf));
      if (got > 0) {
        reports[r].append(buf, got);
      } else {
        open[r] = false;
        --remaining;
      }
    }
  }
  close(release[0]);
  close(release[1]);  // lets every child exit
  for (int r = 0; r < h.world_size; ++r) {
    if (open[r]) {
      kill(pids[r], SIGKILL);
      results[r] = absl::DeadlineExceededError(
          absl::StrCat("rank ", r, " hung: killed by the watchdog after ", h.watchdog.count(), " s"));
    }
    int status = 0;
    waitpid(pids[r], &status, 0);
    close(pipes[r]);
    if (open[r]) continue;
    size_t colon = reports[r].find(':');
    if (colon == std::string::npos) {
      results[r] = absl::InternalError(
          absl::StrCat("rank ", r, " died without a report: ", DecodeWaitStatus(status).ToString()));
      continue;
    }
    int code = std::stoi(reports[r].substr(0, colon));
    results[r] = absl::Status(static_cast<absl::StatusCode>(code), reports[r].substr(colon + 1));
  }
  return results;
}

}  // namespace athanor
