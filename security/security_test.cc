#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "security/cluster_ca.h"
#include "security/private_file.h"
#include "security/secret_box.h"
#include "security/tls.h"
#include "security/token.h"

namespace athanor::security {
namespace {

std::string TempDir() {
  char dir[] = "/tmp/athanor_security_test.XXXXXX";
  return mkdtemp(dir);
}

unsigned Mode(const std::string& path) {
  struct stat st;
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 0777;
}

// The DNS subjectAltNames of a PEM certificate, comma-separated.
std::string SubjectAltNames(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  std::string out;
  auto* names = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; names != nullptr && i < sk_GENERAL_NAME_num(names); ++i) {
    GENERAL_NAME* n = sk_GENERAL_NAME_value(names, i);
    if (n->type != GEN_DNS) continue;
    if (!out.empty()) out += ",";
    out += reinterpret_cast<const char*>(ASN1_STRING_get0_data(n->d.dNSName));
  }
  GENERAL_NAMES_free(names);
  X509_free(cert);
  return out;
}

TEST(TokenTest, GeneratedTokenParsesAndHashesToItsRecord) {
  absl::StatusOr<NewToken> t = GenerateToken();
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->token.size(), 4u + 16 + 1 + 64);
  EXPECT_EQ(t->token.substr(0, 4), "ath_");
  absl::StatusOr<ParsedToken> p = ParseToken(t->token);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->id, t->id);
  EXPECT_TRUE(DigestsEqual(HashSecret(t->salt, p->secret), t->hash));
  EXPECT_FALSE(DigestsEqual(HashSecret(t->salt, std::string(64, '0')), t->hash));
  // Two tokens never share an id or a secret.
  absl::StatusOr<NewToken> u = GenerateToken();
  ASSERT_TRUE(u.ok());
  EXPECT_NE(u->id, t->id);
  EXPECT_NE(u->token, t->token);
}

TEST(TokenTest, MalformedTokensAreRefusedWithoutEchoingThem) {
  for (const std::string& bad : {std::string(""), std::string("Bearer x"),
                                 "ath_" + std::string(16, 'a') + "_" + std::string(63, 'b'),
                                 "ath_" + std::string(16, 'A') + "_" + std::string(64, 'b'),
                                 "xyz_" + std::string(16, 'a') + "_" + std::string(64, 'b')}) {
    absl::StatusOr<ParsedToken> p = ParseToken(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    if (!bad.empty()) {
      EXPECT_EQ(std::string(p.status().message()).find(bad), std::string::npos);
    }
  }
}

TEST(PrivateFileTest, CreatedOwnerOnlyAndRefusedWhenOthersMayRead) {
  std::string dir = TempDir();
  std::string path = dir + "/secret";
  ASSERT_TRUE(WritePrivateFile(path, "s3cret").ok());
  EXPECT_EQ(Mode(path), 0600u);
  EXPECT_EQ(WritePrivateFile(path, "again").code(), absl::StatusCode::kAlreadyExists);
  absl::StatusOr<std::string> read = ReadPrivateFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "s3cret");
  chmod(path.c_str(), 0644);
  read = ReadPrivateFile(path);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(read.status().message(),
            path + " is mode 0644: a secret's file must be readable by its owner only (chmod 600)");
  EXPECT_EQ(ReadPrivateFile(dir + "/missing").status().code(), absl::StatusCode::kNotFound);
}

TEST(ClusterCaTest, InitIssuesNamedCertificatesWithPrivateKeys) {
  std::string dir = TempDir() + "/ca";
  ASSERT_TRUE(InitClusterCa(dir).ok());
  EXPECT_EQ(Mode(dir), 0700u);
  EXPECT_EQ(Mode(dir + "/ca.key"), 0600u);
  EXPECT_EQ(Mode(dir + "/coordinator.key"), 0600u);
  EXPECT_EQ(Mode(dir + "/admin.token"), 0600u);
  EXPECT_EQ(Mode(dir + "/ca.crt"), 0644u);
  ASSERT_TRUE(IssueAgentCertificate(dir, "node-a").ok());
  EXPECT_EQ(Mode(dir + "/agent-node-a.key"), 0600u);
  absl::StatusOr<TlsMaterial> coordinator = LoadTlsMaterial(dir, "coordinator");
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  EXPECT_EQ(SubjectAltNames(coordinator->cert_pem), "coordinator.athanor");
  absl::StatusOr<TlsMaterial> agent = LoadTlsMaterial(dir, "agent-node-a");
  ASSERT_TRUE(agent.ok()) << agent.status();
  EXPECT_EQ(SubjectAltNames(agent->cert_pem), "node-a.node.athanor");
  // The CA is made once.
  absl::Status again = InitClusterCa(dir);
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists) << again;
  // A name that could pose as another role never gets a certificate.
  EXPECT_EQ(IssueAgentCertificate(dir, "coordinator.athanor").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(IssueAgentCertificate(dir, "").code(), absl::StatusCode::kInvalidArgument);
}

TEST(SecretBoxTest, SealsAndOpensOnlyUnderItsKeyAndOwner) {
  std::string dir = TempDir();
  ASSERT_TRUE(SecretBox::CreateKeyFile(dir + "/k1").ok());
  ASSERT_TRUE(SecretBox::CreateKeyFile(dir + "/k2").ok());
  EXPECT_EQ(Mode(dir + "/k1"), 0600u);
  absl::StatusOr<SecretBox> k1 = SecretBox::FromKeyFile(dir + "/k1");
  absl::StatusOr<SecretBox> k2 = SecretBox::FromKeyFile(dir + "/k2");
  ASSERT_TRUE(k1.ok() && k2.ok());
  absl::StatusOr<std::string> sealed = k1->Seal("wJalrXUtnFEMI", "alpha");
  ASSERT_TRUE(sealed.ok()) << sealed.status();
  EXPECT_EQ(sealed->find("wJalrXUtnFEMI"), std::string::npos);
  EXPECT_EQ(sealed->size(), 2u * (12 + 13 + 16));
  absl::StatusOr<std::string> opened = k1->Open(*sealed, "alpha");
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(*opened, "wJalrXUtnFEMI");
  EXPECT_EQ(k1->Open(*sealed, "beta").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(k2->Open(*sealed, "alpha").status().code(), absl::StatusCode::kDataLoss);
  std::string altered = *sealed;
  altered[30] = altered[30] == '0' ? '1' : '0';
  EXPECT_EQ(k1->Open(altered, "alpha").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(k1->Open("zz", "alpha").status().code(), absl::StatusCode::kDataLoss);
  // Two seals of one secret differ (fresh nonces).
  EXPECT_NE(*k1->Seal("wJalrXUtnFEMI", "alpha"), *sealed);
  chmod((dir + "/k1").c_str(), 0640);
  EXPECT_EQ(SecretBox::FromKeyFile(dir + "/k1").status().code(), absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace athanor::security
