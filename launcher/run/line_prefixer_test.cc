#include "launcher/run/line_prefixer.h"

#include <unistd.h>

#include <string>

#include "gtest/gtest.h"

namespace athanor {
namespace {

std::string ReadAvailable(int fd) {
  char buf[4096];
  ssize_t n = read(fd, buf, sizeof(buf));
  return n > 0 ? std::string(buf, n) : std::string();
}

TEST(LinePrefixerTest, PrefixesWholeLinesAndCompletesTheLastOne) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  LinePrefixer p("[3] ", fds[1]);
  p.Feed("hello\nwor", 9);
  EXPECT_EQ(ReadAvailable(fds[0]), "[3] hello\n");
  p.Feed("ld\n\nend", 7);
  EXPECT_EQ(ReadAvailable(fds[0]), "[3] world\n[3] \n");
  p.Flush();
  EXPECT_EQ(ReadAvailable(fds[0]), "[3] end\n");
  p.Flush();  // nothing pending: writes nothing
  close(fds[1]);
  EXPECT_EQ(ReadAvailable(fds[0]), "");
  close(fds[0]);
}

}  // namespace
}  // namespace athanor
