// S3rverProcess dies with the process that started it, even when that
// process is SIGKILLed (a test killed by its watchdog or by ctest's timeout
// must not leave s3rver running).
#include "testing/s3/s3rver_fixture.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace athanor::testing_s3 {
namespace {

TEST(S3rverFixture, DiesWithTheProcessThatStartedIt) {
  int pids[2];
  ASSERT_EQ(::pipe(pids), 0);
  pid_t test = ::fork();
  ASSERT_GE(test, 0);
  if (test == 0) {
    // The "test": starts s3rver, says its pid, and waits to be killed.
    ::close(pids[0]);
    auto server = S3rverProcess::Start("orphan");
    pid_t pid = server.ok() ? (*server)->pid() : -1;
    (void)!::write(pids[1], &pid, sizeof(pid));
    for (;;) ::pause();
  }
  ::close(pids[1]);
  pid_t server = 0;
  ASSERT_EQ(::read(pids[0], &server, sizeof(server)), static_cast<ssize_t>(sizeof(server)));
  ::close(pids[0]);
  // CI has s3rver: its absence is a failure.
  ASSERT_GT(server, 0) << "s3rver did not start";
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, server, 0));
  ASSERT_GE(pidfd, 0) << "pidfd_open: " << strerror(errno);
  ASSERT_EQ(::kill(test, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(test, &status, 0), test);
  // The server's pidfd becomes readable when it exits; 20 s is a watchdog.
  struct pollfd p = {pidfd, POLLIN, 0};
  int ready = ::poll(&p, 1, 20000);
  if (ready != 1) ::kill(server, SIGKILL);  // do not leave it behind either way
  EXPECT_EQ(ready, 1) << "s3rver (pid " << server << ") outlived the test that started it";
  ::close(pidfd);
}

}  // namespace
}  // namespace athanor::testing_s3
