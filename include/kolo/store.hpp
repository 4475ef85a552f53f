// Rendezvous key-value stores, modelled on c10d's Store: how ranks find each other.
// Values are byte strings. Every blocking call is bounded by the store's timeout.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kolo {

using Bytes = std::vector<uint8_t>;

class Store {
 public:
  static constexpr std::chrono::milliseconds kDefaultTimeout{300000};

  virtual ~Store() = default;
  virtual void set(const std::string& key, const Bytes& value) = 0;
  // Waits until `key` exists (bounded by timeout()), then returns its value. Throws TimeoutError.
  virtual Bytes get(const std::string& key) = 0;
  // Adds `delta` to the integer stored at `key` (created as 0) and returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // If `key` is absent and `expected` is empty, or its value equals `expected`, stores `desired`.
  // Returns the value now stored (so the caller can tell whether it won).
  virtual Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) = 0;
  // Removes `key`; returns whether it existed.
  virtual bool delete_key(const std::string& key) = 0;
  // True if every key exists now (does not wait).
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // Waits until every key exists. Throws TimeoutError naming the missing keys.
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }
  virtual int64_t num_keys() = 0;

  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // Conveniences over the byte interface.
  void set(const std::string& key, const std::string& value) { set(key, Bytes(value.begin(), value.end())); }
  std::string get_string(const std::string& key) {
    Bytes b = get(key);
    return std::string(b.begin(), b.end());
  }

 protected:
  std::chrono::milliseconds timeout_ = kDefaultTimeout;
};

// In-process store (threads of one process share it).
std::shared_ptr<Store> make_hash_store();

// Store on a shared file system path; processes on one host (or sharing an NFS path) use it.
std::shared_ptr<Store> make_file_store(const std::string& path, int world_size = -1);

// TCP store, speaking PyTorch c10d's TCPStore protocol: a kolo client joins a store that torch
// hosts (torchrun's agent store), and torch's TCPStore clients use one that kolo hosts. Keys are
// shared with torch's clients (both put "/" in front on the wire). With is_server the process
// also hosts the server (rank 0 in torchrun's model); port 0 picks a free port (see port()).
class TCPStore : public Store {
 public:
  // The server's dialect: torch <= 2.0 (kLegacy) or >= 2.1 (kValidated); kAuto asks the server.
  enum class Protocol { kAuto, kLegacy, kValidated };
  struct Options {
    std::string host = "127.0.0.1";
    uint16_t port = 29500;
    bool is_server = false;
    int world_size = -1;  // when set, the server's constructor waits for this many clients
    std::chrono::milliseconds timeout = kDefaultTimeout;
    Protocol protocol = Protocol::kAuto;
    // The job secret's text (KOLO_SECRET). Non-empty: kolo's store authentication is on. The
    // client proves the secret on every connection, and refuses a server that cannot prove it
    // back; a server hosted here (is_server) serves only clients that prove it. Neither torch's
    // TCPStore clients nor its servers speak it: leave it empty to interoperate with them.
    std::string secret;
  };
  static std::shared_ptr<TCPStore> create(const Options& opts);
  virtual uint16_t port() const = 0;
  // The dialect in use: "torch<=2.0" or "torch>=2.1".
  virtual std::string protocol_name() const = 0;
};

// Runs a TCPStore server with no client in this process (`kolo-store` uses this).
class TCPStoreServer {
 public:
  virtual ~TCPStoreServer() = default;
  // A non-empty `secret` makes every client prove it first (see TCPStore::Options::secret).
  static std::unique_ptr<TCPStoreServer> start(const std::string& host, uint16_t port, const std::string& secret = "");
  virtual uint16_t port() const = 0;
};

// Every key is prefixed with "<prefix>/" before reaching `base`: how subgroups share one store.
std::shared_ptr<Store> make_prefix_store(const std::string& prefix, std::shared_ptr<Store> base);

}  // namespace kolo
