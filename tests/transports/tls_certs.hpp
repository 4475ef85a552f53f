// Test certificates made at run time with OpenSSL (no files in the tree, nothing that expires):
// a CA and leaf certificates it signs, written as PEM files into a fresh temporary folder.
#pragma once
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

namespace kolo::testing {

class TestPki {
 public:
  struct Files {
    std::string cert, key;
  };

  // A self-signed CA named `name`, in its own folder under the system's temp folder.
  explicit TestPki(const std::string& name) : name_(name) {
    char tmpl[] = "/tmp/kolo-tls-test-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp");
    dir_ = tmpl;
    key_ = EVP_EC_gen("P-256");
    ca_ = make(name, key_, nullptr, nullptr, true);
    ca_file_ = dir_ + "/ca.pem";
    write_cert(ca_, ca_file_);
  }
  ~TestPki() {
    X509_free(ca_);
    EVP_PKEY_free(key_);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  const std::string& ca_file() const { return ca_file_; }

  // A leaf certificate for `cn`, signed by this CA.
  Files issue(const std::string& cn) {
    EVP_PKEY* k = EVP_EC_gen("P-256");
    X509* c = make(cn, k, ca_, key_, false);
    Files f{dir_ + "/" + cn + ".pem", dir_ + "/" + cn + ".key"};
    write_cert(c, f.cert);
    FILE* fp = std::fopen(f.key.c_str(), "w");
    PEM_write_PrivateKey(fp, k, nullptr, nullptr, 0, nullptr, nullptr);
    std::fclose(fp);
    X509_free(c);
    EVP_PKEY_free(k);
    return f;
  }

 private:
  static X509* make(const std::string& cn, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key, bool ca) {
    static long serial = 1;
    X509* x = X509_new();
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), ++serial);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 24 * 3600);
    X509_set_pubkey(x, key);
    X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
    X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : X509_get_subject_name(x));
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer ? issuer : x, x, nullptr, nullptr, 0);
    const char* bc = ca ? "critical,CA:TRUE" : "critical,CA:FALSE";
    if (X509_EXTENSION* e = X509V3_EXT_conf_nid(nullptr, &ctx, NID_basic_constraints, bc)) {
      X509_add_ext(x, e, -1);
      X509_EXTENSION_free(e);
    }
    if (ca)
      if (X509_EXTENSION* e = X509V3_EXT_conf_nid(nullptr, &ctx, NID_key_usage, "critical,keyCertSign,cRLSign")) {
        X509_add_ext(x, e, -1);
        X509_EXTENSION_free(e);
      }
    X509_sign(x, issuer_key ? issuer_key : key, EVP_sha256());
    return x;
  }
  static void write_cert(X509* c, const std::string& path) {
    FILE* fp = std::fopen(path.c_str(), "w");
    PEM_write_X509(fp, c);
    std::fclose(fp);
  }

  std::string name_, dir_, ca_file_;
  EVP_PKEY* key_ = nullptr;
  X509* ca_ = nullptr;
};

}  // namespace kolo::testing
