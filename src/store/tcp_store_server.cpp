#include "store/tcp_store_server.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <deque>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "kolo/error.hpp"
#include "store/store_common.hpp"
#include "store/store_socket.hpp"
#include "store/tcp_store_wire.hpp"

namespace kolo::store_detail {

namespace {

// What a connection has shown of itself: c10d's clients of torch >= 2.1 open with VALIDATE + the
// magic number; older ones (torch 1.13, 2.0) send requests at once, in the legacy numbering.
enum class Hello : uint8_t { kUnknown, kLegacy, kValidated };

struct Connection {
  std::vector<uint8_t> in;   // bytes received and not yet parsed into requests
  std::vector<uint8_t> out;  // replies not yet written
  size_t out_sent = 0;
  bool watching_writable = false;
  Hello hello = Hello::kUnknown;
  Dialect dialect() const { return hello == Hello::kValidated ? Dialect::kValidated : Dialect::kLegacy; }
};

// A request that cannot be parsed (an unknown op, a length beyond its bound) ends the connection.
struct Garbage {
  std::string why;
};

}  // namespace

struct TcpStoreServerCore::Loop {
  int listen_fd = -1;
  int epoll_fd = -1;
  int wake_fd = -1;  // eventfd: the destructor's way to interrupt epoll_wait
  uint16_t port = 0;
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> parked_count{0};
  std::atomic<uint64_t> connection_count{0};
  std::atomic<uint64_t> dropped_count{0};
  std::thread thread;

  std::unordered_map<int, Connection> conns;
  std::unordered_map<std::string, Bytes> data;
  std::unordered_map<std::string, std::deque<Bytes>> queues;
  std::unordered_map<int, std::vector<std::string>> parked;             // a WAIT's keys, by connection
  std::unordered_map<std::string, std::unordered_set<int>> waiting_on;  // key -> parked connections
  std::vector<int> runnable;  // connections whose WAIT was answered: resume their input

  ~Loop() {
    if (thread.joinable()) {
      stopping = true;
      uint64_t one = 1;
      [[maybe_unused]] ssize_t n = ::write(wake_fd, &one, sizeof(one));
      thread.join();
    }
    for (auto& [fd, conn] : conns) ::close(fd);
    if (listen_fd >= 0) ::close(listen_fd);
    if (epoll_fd >= 0) ::close(epoll_fd);
    if (wake_fd >= 0) ::close(wake_fd);
  }

  void watch(int fd, uint32_t events, int ctl) {
    epoll_event ev{};
    ev.events = events;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_fd, ctl, fd, &ev) != 0) {
      throw Error("TCPStore server: epoll_ctl failed: " + errno_text(errno));
    }
  }

  void run() {
    // The process's signals belong to its other threads (kolo-store waits for SIGTERM itself).
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    try {
      serve();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "kolo TCPStore server on port %u stopped: %s\n", unsigned(port), e.what());
    }
  }

  void serve() {
    epoll_event events[64];
    while (!stopping) {
      // c10d's WAIT has no server-side deadline (clients time out and cancel), so nothing here
      // needs a timer: sleep until a socket or the destructor says something.
      int n = ::epoll_wait(epoll_fd, events, 64, -1);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw Error("epoll_wait failed: " + errno_text(errno));
      }
      for (int i = 0; i < n; ++i) {
        int fd = events[i].data.fd;
        uint32_t ev = events[i].events;
        if (fd == wake_fd) continue;  // stopping is checked by the loop
        if (fd == listen_fd) {
          accept_all();
          continue;
        }
        if (conns.count(fd) == 0) continue;
        if (ev & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
          bool open = read_available(fd);
          // A client may send its last requests and hang up at once (c10d's SET has no reply):
          // serve what arrived before closing.
          if (conns.count(fd)) process_input(fd);
          if (!open && conns.count(fd)) close_connection(fd);
        } else if (ev & EPOLLOUT) {
          flush(fd);
        }
      }
      drain_runnable();
    }
  }

  void accept_all() {
    for (;;) {
      int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE) {
          // Out of descriptors: back off instead of spinning on the still-readable listener.
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return;
      }
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      conns.emplace(fd, Connection{});
      watch(fd, EPOLLIN, EPOLL_CTL_ADD);
      ++connection_count;
    }
  }

  void close_connection(int fd) {
    if (parked.count(fd)) unpark(fd);
    ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, nullptr);
    ::close(fd);
    conns.erase(fd);
    --connection_count;
  }

  // Reads everything the socket has; false on EOF or error (the caller closes the connection
  // after serving what arrived). A connection whose unparsed input outgrows the largest possible
  // request is dropped at once: memory stays bounded.
  bool read_available(int fd) {
    Connection& c = conns.at(fd);
    uint8_t buf[65536];
    for (;;) {
      ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n > 0) {
        c.in.insert(c.in.end(), buf, buf + n);
        if (c.in.size() > kMaxValueBytes + 2 * kMaxKeyBytes + 64) {
          drop(fd, "more unparsed input than any request can hold");
          return false;
        }
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      return false;
    }
  }

  void drop(int fd, const std::string& why) {
    ++dropped_count;
    // Rate-limited: a port scanner must not flood the log.
    if (dropped_count <= 10) {
      std::fprintf(stderr, "kolo TCPStore server on port %u: dropped a client: %s\n", unsigned(port), why.c_str());
    }
    close_connection(fd);
  }

  // Handles every complete request buffered on fd, then writes the replies. As in c10d's
  // servers, a parked WAIT does not hold back later requests: torch 1.13's client gives up on a
  // WAIT by its own socket timeout and goes on with the next request on the same connection.
  void process_input(int fd) {
    Connection& c = conns.at(fd);
    size_t pos = 0;
    try {
      if (c.hello == Hello::kUnknown && !read_hello(c, pos)) return;
      while (pos < c.in.size()) {
        WireReader r(c.in.data() + pos, c.in.size() - pos);
        try {
          if (!handle_one(fd, c, r)) break;
        } catch (const WireReader::NeedMore&) {
          break;
        }
        pos += r.consumed();
      }
    } catch (const std::exception& e) {
      drop(fd, e.what());
      return;
    }
    c.in.erase(c.in.begin(), c.in.begin() + static_cast<ptrdiff_t>(pos));
    flush(fd);
  }

  // Tells the dialect from a connection's first bytes. VALIDATE (0) + magic opens a torch >= 2.1
  // connection; anything else is a legacy request (a legacy SET is also 0, but its u64 key
  // length would need the magic in its low half: a 1 GiB key, which no client sends). False
  // while too few bytes have arrived to tell.
  bool read_hello(Connection& c, size_t& pos) {
    if (c.in.empty()) return false;
    if (c.in[0] != 0) {
      c.hello = Hello::kLegacy;
      return true;
    }
    if (c.in.size() < 5) return false;
    WireReader r(c.in.data() + 1, 4);
    if (r.u32() == kValidationMagic) {
      c.hello = Hello::kValidated;
      pos = 5;
    } else {
      c.hello = Hello::kLegacy;
    }
    return true;
  }

  // Parses and serves one request. Throws NeedMore when incomplete, Error on garbage.
  bool handle_one(int fd, Connection& c, WireReader& r) {
    uint8_t code = r.u8();
    auto op = decode_op(code, c.dialect());
    if (!op || *op == StoreOp::kWatchKey) {
      throw Error("unknown or unsupported request code " + std::to_string(code) + " (" + dialect_name(c.dialect()) +
                  " numbering)");
    }
    WireWriter w;
    serve_request(fd, *op, r, w);
    ++requests;
    c.out.insert(c.out.end(), w.bytes().begin(), w.bytes().end());
    return true;
  }

  // Reads op's fields (all of them before changing anything, so that NeedMore leaves no trace)
  // and writes its reply into w.
  void serve_request(int fd, StoreOp op, WireReader& r, WireWriter& w) {
    switch (op) {
      case StoreOp::kValidate:
        if (r.u32() != kValidationMagic) throw Error("VALIDATE with a wrong magic number");
        return;
      case StoreOp::kPing:
        w.u32(r.u32());
        return;
      case StoreOp::kSet: {
        std::string key = r.key();
        Bytes value = r.value();
        data[key] = std::move(value);
        return key_changed(key);
      }
      case StoreOp::kCompareSet: {
        std::string key = r.key();
        Bytes expected = r.value();
        Bytes desired = r.value();
        auto it = data.find(key);
        std::optional<Bytes> current;
        if (it != data.end()) current = it->second;
        if (auto to_store = compare_set_decision(current, expected, desired)) {
          data[key] = *to_store;
          w.value(*to_store);
          return key_changed(key);
        }
        w.value(current ? *current : Bytes{});
        return;
      }
      case StoreOp::kGet: {
        std::string key = r.key();
        auto it = data.find(key);
        w.value(it == data.end() ? Bytes{} : it->second);  // as c10d's libuv server: clients WAIT first
        return;
      }
      case StoreOp::kAdd: {
        std::string key = r.key();
        int64_t delta = r.i64();
        auto it = data.find(key);
        // A non-integer value throws InvalidArgument and ends the connection, as in c10d.
        int64_t value = (it == data.end() ? 0 : parse_counter(key, it->second)) + delta;
        data[key] = format_counter(value);
        w.i64(value);
        return key_changed(key);
      }
      case StoreOp::kCheck: {
        auto keys = r.keys();
        w.u8(missing(keys).empty() ? kCheckReady : kCheckNotReady);
        return;
      }
      case StoreOp::kWait: {
        auto keys = r.keys();
        if (missing(keys).empty()) {
          w.u8(kStopWaiting);
          return;
        }
        return park(fd, std::move(keys));
      }
      case StoreOp::kCancelWait:
        if (parked.count(fd)) unpark(fd);
        w.u8(kWaitCanceled);
        return;
      case StoreOp::kNumKeys:
        w.i64(static_cast<int64_t>(data.size()));
        return;
      case StoreOp::kDeleteKey:
        w.i64(static_cast<int64_t>(data.erase(r.key())));
        return;
      case StoreOp::kAppend: {
        std::string key = r.key();
        Bytes value = r.value();
        Bytes& stored = data[key];
        if (stored.size() + value.size() > kMaxValueBytes) throw Error("APPEND beyond the value size limit");
        stored.insert(stored.end(), value.begin(), value.end());
        return key_changed(key);
      }
      case StoreOp::kMultiGet: {
        for (const auto& key : r.keys()) {
          auto it = data.find(key);
          w.value(it == data.end() ? Bytes{} : it->second);
        }
        return;
      }
      case StoreOp::kMultiSet: {
        uint64_t count = r.u64();
        if (count > kMaxKeyCount) throw Error("MULTI_SET of " + std::to_string(count) + " keys");
        std::vector<std::pair<std::string, Bytes>> pairs;
        for (uint64_t i = 0; i < count; ++i) {
          std::string key = r.key();
          pairs.emplace_back(std::move(key), r.value());
        }
        for (auto& [key, value] : pairs) {
          data[key] = std::move(value);
          key_changed(key);
        }
        return;
      }
      case StoreOp::kQueuePush: {
        std::string key = r.key();
        queues[key].push_back(r.value());
        return key_changed(key);
      }
      case StoreOp::kQueuePop: {
        auto it = queues.find(r.key());
        w.i64(it == queues.end() ? 0 : static_cast<int64_t>(it->second.size()));
        if (it != queues.end() && !it->second.empty()) {
          w.value(it->second.front());
          it->second.pop_front();
          if (it->second.empty()) queues.erase(it);
        }
        return;
      }
      case StoreOp::kQueueLen: {
        auto it = queues.find(r.key());
        w.i64(it == queues.end() ? 0 : static_cast<int64_t>(it->second.size()));
        return;
      }
      case StoreOp::kWatchKey: break;
    }
    throw Error(std::string("unsupported request ") + op_name(op));
  }

  // A key "exists" for CHECK and WAIT when it holds a value or a non-empty queue (as in c10d).
  bool present(const std::string& key) const {
    if (data.count(key)) return true;
    auto q = queues.find(key);
    return q != queues.end() && !q->second.empty();
  }

  std::vector<std::string> missing(const std::vector<std::string>& keys) const {
    std::vector<std::string> out;
    for (const auto& key : keys) {
      if (!present(key)) out.push_back(key);
    }
    return out;
  }

  // One WAIT per connection: a new one replaces a WAIT its client abandoned (torch 1.13), so
  // that no late STOP_WAITING answers a later request.
  void park(int fd, std::vector<std::string> keys) {
    if (parked.count(fd)) unpark(fd);
    for (const auto& key : missing(keys)) waiting_on[key].insert(fd);
    parked[fd] = std::move(keys);
    ++parked_count;
  }

  void unpark(int fd) {
    auto it = parked.find(fd);
    for (const auto& key : it->second) {
      auto w = waiting_on.find(key);
      if (w == waiting_on.end()) continue;
      w->second.erase(fd);
      if (w->second.empty()) waiting_on.erase(w);
    }
    parked.erase(it);
    --parked_count;
  }

  // A key was created or changed: answer the parked WAITs it completes.
  void key_changed(const std::string& key) {
    auto it = waiting_on.find(key);
    if (it == waiting_on.end()) return;
    std::unordered_set<int> fds = std::move(it->second);
    waiting_on.erase(it);
    for (int fd : fds) try_complete(fd);
  }

  void try_complete(int fd) {
    auto it = parked.find(fd);
    if (it == parked.end()) return;
    auto still_missing = missing(it->second);
    if (!still_missing.empty()) {
      // Keys may have been deleted since the WAIT was parked; watch whatever is missing now.
      for (const auto& key : still_missing) waiting_on[key].insert(fd);
      return;
    }
    conns.at(fd).out.push_back(kStopWaiting);
    unpark(fd);
    runnable.push_back(fd);
  }

  void drain_runnable() {
    // process_input() may complete more parked requests, which append to `runnable`.
    for (size_t i = 0; i < runnable.size(); ++i) {
      int fd = runnable[i];
      if (conns.count(fd)) process_input(fd);
    }
    runnable.clear();
  }

  // Writes queued replies; watches for writability only while some remain.
  void flush(int fd) {
    Connection& c = conns.at(fd);
    while (c.out_sent < c.out.size()) {
      ssize_t n = ::send(fd, c.out.data() + c.out_sent, c.out.size() - c.out_sent, MSG_NOSIGNAL);
      if (n > 0) {
        c.out_sent += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (!c.watching_writable) {
          watch(fd, EPOLLIN | EPOLLOUT, EPOLL_CTL_MOD);
          c.watching_writable = true;
        }
        return;
      }
      close_connection(fd);
      return;
    }
    c.out.clear();
    c.out_sent = 0;
    if (c.watching_writable) {
      watch(fd, EPOLLIN, EPOLL_CTL_MOD);
      c.watching_writable = false;
    }
  }
};

TcpStoreServerCore::TcpStoreServerCore(std::unique_ptr<Loop> loop) : loop_(std::move(loop)) {}

TcpStoreServerCore::~TcpStoreServerCore() = default;

std::unique_ptr<TcpStoreServerCore> TcpStoreServerCore::start(const std::string& host, uint16_t port) {
  auto loop = std::make_unique<Loop>();
  loop->listen_fd = listen_on(host, port);
  loop->port = local_port(loop->listen_fd);
  loop->epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  if (loop->epoll_fd < 0) throw Error("TCPStore server: epoll_create1 failed: " + errno_text(errno));
  loop->wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (loop->wake_fd < 0) throw Error("TCPStore server: eventfd failed: " + errno_text(errno));
  loop->watch(loop->listen_fd, EPOLLIN, EPOLL_CTL_ADD);
  loop->watch(loop->wake_fd, EPOLLIN, EPOLL_CTL_ADD);
  Loop* raw = loop.get();
  loop->thread = std::thread([raw] { raw->run(); });
  return std::unique_ptr<TcpStoreServerCore>(new TcpStoreServerCore(std::move(loop)));
}

uint16_t TcpStoreServerCore::port() const { return loop_->port; }
uint64_t TcpStoreServerCore::requests_handled() const { return loop_->requests; }
uint64_t TcpStoreServerCore::parked_requests() const { return loop_->parked_count; }
uint64_t TcpStoreServerCore::open_connections() const { return loop_->connection_count; }
uint64_t TcpStoreServerCore::dropped_connections() const { return loop_->dropped_count; }

}  // namespace kolo::store_detail
