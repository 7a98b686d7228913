#include "launcher/cli_security.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>

#include <gtest/gtest.h>

namespace athanor::cli {
namespace {

TEST(CliSecurityTest, TokenFileMustBeOwnerOnly) {
  char dir[] = "/tmp/athanor_cli_security_test.XXXXXX";
  std::string path = std::string(mkdtemp(dir)) + "/token";
  std::ofstream(path) << "ath_0123456789abcdef_" << std::string(64, 'a') << "\n";
  chmod(path.c_str(), 0644);
  unsetenv("ATHANOR_TOKEN");
  CliSecurity s{"", path};
  absl::StatusOr<std::string> token = ReadCliToken(s);
  ASSERT_FALSE(token.ok());
  EXPECT_EQ(token.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(token.status().message(),
            path + " is mode 0644: a secret's file must be readable by its owner only (chmod 600)");
  chmod(path.c_str(), 0600);
  token = ReadCliToken(s);
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "ath_0123456789abcdef_" + std::string(64, 'a'));  // trailing newline dropped
  // $ATHANOR_TOKEN wins over the file.
  setenv("ATHANOR_TOKEN", "ath_from_env", 1);
  EXPECT_EQ(*ReadCliToken(s), "ath_from_env");
  unsetenv("ATHANOR_TOKEN");
}

TEST(CliSecurityTest, NoCaMeansPlaintextAndAMissingCaIsAnError) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> plain = ConnectCoordinator("127.0.0.1:1", CliSecurity{});
  EXPECT_TRUE(plain.ok());
  absl::StatusOr<std::shared_ptr<grpc::Channel>> missing =
      ConnectCoordinator("127.0.0.1:1", CliSecurity{"/nonexistent/ca.crt", ""});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace athanor::cli
