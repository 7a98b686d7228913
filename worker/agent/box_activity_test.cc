// box_activity: a rank's network and disk counters from a /proc tree, and live:
// a TCP socket's bytes through sock_diag, a process in a network namespace of its own.
#include "worker/agent/box_activity.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>
#include <csignal>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace athanor::agent {
namespace {

namespace fs = std::filesystem;

constexpr char kNetDev[] =
    "Inter-|   Receive                                                |  Transmit\n"
    " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n"
    "    lo:  900000     10    0    0    0     0          0         0   900000      10    0    0    0     0       0          0\n"
    "  eth0:    1000      5    0    0    0     0          0         0      234       3    0    0    0     0       0          0\n"
    "  veth1:     10      1    0    0    0     0          0         0        6       1    0    0    0     0       0          0\n";

void Write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

std::string Stat(int pid, int pgid) {
  return std::to_string(pid) + " (python3) S 1 " + std::to_string(pgid) +
         " 0 0 -1 0 0 0 0 0 10 10 0 0 20 0 1 0 100 0 0\n";
}

std::string Io(int rchar, int wchar, int write_bytes) {
  return "rchar: " + std::to_string(rchar) + "\nwchar: " + std::to_string(wchar) +
         "\nsyscr: 3\nsyscw: 4\nread_bytes: 8192\nwrite_bytes: " + std::to_string(write_bytes) +
         "\ncancelled_write_bytes: 0\n";
}

class BoxActivityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) / ("proc." + std::to_string(getpid()));
    fs::remove_all(root_);
    Write(root_ / "100/stat", Stat(100, 100));
    Write(root_ / "100/io", Io(1000, 500, 4096));
    Write(root_ / "101/stat", Stat(101, 100));
    Write(root_ / "101/io", Io(20, 30, 8192));
    Write(root_ / "200/stat", Stat(200, 200));  // another group
    Write(root_ / "200/io", Io(7777, 7777, 7777));
    Write(root_ / "100/net/dev", kNetDev);
    fs::create_directories(root_ / "self/ns");
    fs::create_directories(root_ / "100/ns");
    fs::create_symlink("net:[4026531840]", root_ / "self/ns/net");
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

TEST_F(BoxActivityTest, SharedNamespaceCountsTheGroupsTcpSockets) {
  fs::create_symlink("net:[4026531840]", root_ / "100/ns/net");
  fs::create_directories(root_ / "100/fd");
  fs::create_directories(root_ / "101/fd");
  fs::create_directories(root_ / "200/fd");
  fs::create_symlink("socket:[111]", root_ / "100/fd/3");
  fs::create_symlink("socket:[111]", root_ / "101/fd/3");  // shared after fork: once
  fs::create_symlink("socket:[222]", root_ / "101/fd/4");
  fs::create_symlink("socket:[999]", root_ / "101/fd/5");  // UDP, or gone: not in the dump
  fs::create_symlink("/tmp/file", root_ / "101/fd/6");
  fs::create_symlink("socket:[333]", root_ / "200/fd/3");  // another group's
  const TcpBytes tcp = {{111, 5000}, {222, 700}, {333, 100000}};
  BoxActivity a = SampleBoxActivity(100, root_.string(), &tcp);
  EXPECT_TRUE(a.measured);
  EXPECT_FALSE(a.net_namespace);
  EXPECT_EQ(a.net_bytes, 5700);
  EXPECT_EQ(a.disk_write_bytes, 12288);
}

TEST(SocketTallyTest, KeepsClosedSocketsBytesAndCountsNewOnes) {
  SocketTally tally;
  EXPECT_EQ(tally.Update({{1, 100}, {2, 50}}), 150);
  EXPECT_EQ(tally.Update({{1, 400}}), 450);            // 2 closed: its 50 stay
  EXPECT_EQ(tally.Update({{1, 400}, {3, 10}}), 460);   // 3 is new
  EXPECT_EQ(tally.Update({{1, 20}}), 480);             // 1 reused by a new socket
  EXPECT_EQ(tally.Update({}), 480);
}

TEST_F(BoxActivityTest, OwnNamespaceCountsItsInterfacesButLoopback) {
  fs::create_symlink("net:[4026532999]", root_ / "100/ns/net");
  BoxActivity a = SampleBoxActivity(100, root_.string());
  EXPECT_TRUE(a.measured);
  EXPECT_TRUE(a.net_namespace);
  EXPECT_EQ(a.net_bytes, 1250);  // eth0 1000 + 234, veth1 10 + 6
  EXPECT_EQ(a.disk_write_bytes, 12288);
}

TEST_F(BoxActivityTest, GoneGroupIsNotMeasured) {
  BoxActivity a = SampleBoxActivity(300, root_.string());
  EXPECT_FALSE(a.measured);
  EXPECT_EQ(a.net_bytes, 0);
}

TEST(BoxActivityParseTest, RejectsWhatIsNotTheirFormat) {
  double r = -1, w = -1, d = -1;
  EXPECT_FALSE(ParseProcIo("garbage\nrchar: x\n", &r, &w, &d));
  EXPECT_EQ(ParseNetDev("nothing here"), -1);
  EXPECT_EQ(ParseNetDev(std::string(kNetDev).substr(0, 200)), 0);  // the header alone
}

TEST(BoxActivityLiveTest, MeasuresOwnProcessGroup) {
  BoxActivity a = SampleBoxActivity(getpgrp());
  EXPECT_TRUE(a.measured);
  EXPECT_FALSE(a.net_namespace);
}

TEST(BoxActivityLiveTest, ReadsTcpBytesOfALiveSocket) {
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(listener, 1), 0);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  int client = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  int server = accept(listener, nullptr, nullptr);
  ASSERT_GE(server, 0);
  const std::string data(1000, 'x');
  ASSERT_EQ(write(client, data.data(), data.size()), 1000);
  char buf[1000];
  size_t got = 0;
  while (got < sizeof(buf)) {
    ssize_t n = read(server, buf + got, sizeof(buf) - got);
    ASSERT_GT(n, 0);
    got += static_cast<size_t>(n);
  }
  struct stat st;
  ASSERT_EQ(fstat(server, &st), 0);
  TcpBytes tcp = ReadTcpBytes();
  ASSERT_EQ(tcp.count(st.st_ino), 1u);
  EXPECT_EQ(tcp.at(st.st_ino), 1000);  // received; it sent nothing
  close(server);
  close(client);
  close(listener);
}

TEST(BoxActivityLiveTest, ProcessInItsOwnNetworkNamespaceIsMeasuredByItsInterfaces) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: unshare(CLONE_NEWNET)";
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    setpgid(0, 0);
    char ok = unshare(CLONE_NEWNET) == 0 ? 'y' : 'n';
    if (write(ready[1], &ok, 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  char ok = 0;
  ASSERT_EQ(read(ready[0], &ok, 1), 1);
  ASSERT_EQ(ok, 'y');
  BoxActivity a = SampleBoxActivity(child);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  close(ready[0]);
  close(ready[1]);
  EXPECT_TRUE(a.measured);
  EXPECT_TRUE(a.net_namespace);
  EXPECT_EQ(a.net_bytes, 0);  // a new namespace has lo alone
}

}  // namespace
}  // namespace athanor::agent
