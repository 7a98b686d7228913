#include "testing/coordinator/watchdog.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <atomic>

namespace athanor::bench {
namespace {

std::atomic<pid_t> g_pid{0};
std::atomic<const char*> g_message{""};

void OnAlarm(int) {
  const char* msg = g_message.load();
  ssize_t unused = write(STDERR_FILENO, msg, strlen(msg));
  (void)unused;
  pid_t p = g_pid.load();
  if (p > 0) kill(p, SIGKILL);
  _exit(99);
}

}  // namespace

void ArmWatchdog(unsigned seconds, const char* message) {
  g_message = message;
  signal(SIGALRM, OnAlarm);
  alarm(seconds);
}

void WatchCoordinator(pid_t pid) { g_pid = pid; }

void DisarmWatchdog() { alarm(0); }

}  // namespace athanor::bench
