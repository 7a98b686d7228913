#include "security/cluster_ca.h"

#include <sys/stat.h>

#include <memory>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "security/private_file.h"
#include "security/secret_box.h"
#include "security/token.h"

namespace athanor::security {
namespace {

struct CaFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(BIO* p) const { BIO_free(p); }
};
using Key = std::unique_ptr<EVP_PKEY, CaFree>;
using Cert = std::unique_ptr<X509, CaFree>;
using Bio = std::unique_ptr<BIO, CaFree>;

absl::Status OpenSslError(const std::string& what) {
  unsigned long e = ERR_get_error();
  char buf[256] = "unknown error";
  if (e != 0) ERR_error_string_n(e, buf, sizeof(buf));
  ERR_clear_error();
  return absl::InternalError(absl::StrCat("openssl ", what, ": ", buf));
}

absl::StatusOr<Key> NewKey() {
  Key key(EVP_EC_gen("P-256"));
  if (!key) return OpenSslError("EC key generation");
  return key;
}

std::string Pem(EVP_PKEY* key) {
  Bio bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

std::string Pem(X509* cert) {
  Bio bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), cert);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

absl::Status AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return OpenSslError(absl::StrCat("extension ", value));
  int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  return ok == 1 ? absl::OkStatus() : OpenSslError("X509_add_ext");
}

// A certificate for `key` named `cn` (and `dns` in subjectAltName unless
// empty), signed by issuer_key (self-signed when issuer is null).
absl::StatusOr<Cert> MakeCert(EVP_PKEY* key, const std::string& cn, const std::string& dns,
                              bool is_ca, X509* issuer, EVP_PKEY* issuer_key, int days) {
  Cert cert(X509_new());
  if (!cert) return OpenSslError("X509_new");
  X509_set_version(cert.get(), 2);
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof(serial)) != 1) return OpenSslError("RAND_bytes");
  serial[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(serial, sizeof(serial), nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);  // tolerate clock skew
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(days) * 86400);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("athanor"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509* signer = issuer != nullptr ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  RETURN_IF_ERROR(AddExtension(cert.get(), signer, NID_basic_constraints,
                               is_ca ? "critical,CA:TRUE,pathlen:0" : "critical,CA:FALSE"));
  RETURN_IF_ERROR(AddExtension(cert.get(), signer, NID_key_usage,
                               is_ca ? "critical,keyCertSign,cRLSign"
                                     : "critical,digitalSignature,keyEncipherment"));
  if (!is_ca) {
    RETURN_IF_ERROR(AddExtension(cert.get(), signer, NID_ext_key_usage, "serverAuth,clientAuth"));
  }
  if (!dns.empty()) {
    RETURN_IF_ERROR(AddExtension(cert.get(), signer, NID_subject_alt_name, "DNS:" + dns));
  }
  if (X509_sign(cert.get(), issuer_key != nullptr ? issuer_key : key, EVP_sha256()) == 0) {
    return OpenSslError("X509_sign");
  }
  return cert;
}

struct Ca {
  Cert cert;
  Key key;
};

absl::StatusOr<Ca> LoadCa(const std::string& dir) {
  ASSIGN_OR_RETURN(std::string cert_pem, ReadSmallFile(dir + "/ca.crt"));
  ASSIGN_OR_RETURN(std::string key_pem, ReadPrivateFile(dir + "/ca.key"));
  Bio cb(BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size())));
  Bio kb(BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())));
  Ca ca{Cert(PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr)),
        Key(PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr))};
  if (!ca.cert || !ca.key) return OpenSslError("reading the CA in " + dir);
  return ca;
}

absl::Status Issue(const std::string& dir, const std::string& base, const std::string& cn,
                   const std::string& dns, int days) {
  ASSIGN_OR_RETURN(Ca ca, LoadCa(dir));
  ASSIGN_OR_RETURN(Key key, NewKey());
  ASSIGN_OR_RETURN(Cert cert, MakeCert(key.get(), cn, dns, false, ca.cert.get(), ca.key.get(), days));
  RETURN_IF_ERROR(WritePrivateFile(dir + "/" + base + ".key", Pem(key.get()), /*overwrite=*/true));
  // A certificate is public; 0600 is simply what WritePrivateFile makes.
  RETURN_IF_ERROR(WritePrivateFile(dir + "/" + base + ".crt", Pem(cert.get()), true));
  chmod((dir + "/" + base + ".crt").c_str(), 0644);
  return absl::OkStatus();
}

}  // namespace

std::string AgentName(const std::string& node) { return node + kAgentNameSuffix; }

absl::Status ValidateNodeName(const std::string& node) {
  if (node.empty() || node.size() > 63) {
    return absl::InvalidArgumentError("node name: must be 1 to 63 characters");
  }
  if (node[0] == '-') return absl::InvalidArgumentError("node name: must not start with '-'");
  for (char c : node) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
          c == '_')) {
      return absl::InvalidArgumentError(
          absl::StrCat("node name '", node, "': only letters, digits, '-' and '_' may name a node"));
    }
  }
  return absl::OkStatus();
}

absl::Status InitClusterCa(const std::string& dir, int valid_days) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", strerror(errno)));
  }
  struct stat st;
  if (stat((dir + "/ca.key").c_str(), &st) == 0) {
    return absl::AlreadyExistsError(absl::StrCat(
        dir, "/ca.key exists: a cluster CA is made once (rotate into a new folder)"));
  }
  ASSIGN_OR_RETURN(Key key, NewKey());
  ASSIGN_OR_RETURN(Cert cert, MakeCert(key.get(), "athanor cluster CA", "", true, nullptr,
                                       nullptr, valid_days * 2));
  RETURN_IF_ERROR(WritePrivateFile(dir + "/ca.key", Pem(key.get())));
  RETURN_IF_ERROR(WritePrivateFile(dir + "/ca.crt", Pem(cert.get()), true));
  chmod((dir + "/ca.crt").c_str(), 0644);
  RETURN_IF_ERROR(IssueCoordinatorCertificate(dir, valid_days));
  RETURN_IF_ERROR(SecretBox::CreateKeyFile(dir + "/secrets.key"));
  ASSIGN_OR_RETURN(NewToken token, GenerateToken());
  return WritePrivateFile(dir + "/admin.token", token.token + "\n");
}

absl::Status IssueAgentCertificate(const std::string& dir, const std::string& node, int valid_days) {
  RETURN_IF_ERROR(ValidateNodeName(node));
  return Issue(dir, "agent-" + node, node, AgentName(node), valid_days);
}

absl::Status IssueCoordinatorCertificate(const std::string& dir, int valid_days) {
  return Issue(dir, "coordinator", "athanor-coordinator", kCoordinatorName, valid_days);
}

}  // namespace athanor::security
