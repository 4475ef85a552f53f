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
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "kolo/error.hpp"
#include "store/store_common.hpp"
#include "store/store_socket.hpp"
#include "store/tcp_store_wire.hpp"

namespace kolo::store_detail {

namespace {

struct Connection {
  std::vector<uint8_t> in;   // bytes received and not yet parsed into requests
  std::vector<uint8_t> out;  // replies not yet written
  size_t out_sent = 0;
  bool watching_writable = false;
};

// A GET or WAIT whose keys were missing: answered later, by key_changed() or expire().
struct Parked {
  StoreOp op;
  std::vector<std::string> keys;
  Clock::time_point deadline;
};

bool is_internal_key(const std::string& key) { return key.rfind(kInternalKeyPrefix, 0) == 0; }

void expect_end(const WireReader& r) {
  if (!r.done()) throw Error("TCPStore: malformed request (trailing bytes)");
}

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
  std::thread thread;

  std::unordered_map<int, Connection> conns;
  std::unordered_map<std::string, Bytes> data;
  std::unordered_map<int, Parked> parked;                             // by connection
  std::unordered_map<std::string, std::unordered_set<int>> waiting_on;  // key -> parked connections
  std::vector<int> runnable;  // connections whose parked request was answered: resume their input

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
      int n = ::epoll_wait(epoll_fd, events, 64, next_wakeup_ms());
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
          if (!read_available(fd)) continue;  // closed
          process_input(fd);
        } else if (ev & EPOLLOUT) {
          flush(fd);
        }
      }
      expire_parked();
      drain_runnable();
    }
  }

  // epoll_wait's timeout: until the earliest parked deadline, or forever when nothing is parked.
  int next_wakeup_ms() const {
    if (parked.empty()) return -1;
    auto earliest = Clock::time_point::max();
    for (const auto& [fd, p] : parked) earliest = std::min(earliest, p.deadline);
    return static_cast<int>(std::min<int64_t>(remaining(earliest).count(), 1 << 30));
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

  // Reads everything the socket has; false (connection closed) on EOF or error.
  bool read_available(int fd) {
    Connection& c = conns.at(fd);
    uint8_t buf[65536];
    for (;;) {
      ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n > 0) {
        c.in.insert(c.in.end(), buf, buf + n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      close_connection(fd);
      return false;
    }
  }

  // Handles every complete request buffered on fd, stopping while one is parked, then writes
  // the replies.
  void process_input(int fd) {
    Connection& c = conns.at(fd);
    size_t pos = 0;
    try {
      while (parked.count(fd) == 0 && c.in.size() - pos >= kFrameHeaderBytes) {
        uint32_t len = read_frame_length(c.in.data() + pos);
        if (len > kMaxFrameBytes) throw Error("TCPStore: request frame too large");
        if (c.in.size() - pos - kFrameHeaderBytes < len) break;
        handle_request(fd, c, c.in.data() + pos + kFrameHeaderBytes, len);
        pos += kFrameHeaderBytes + len;
      }
    } catch (const Error&) {
      // A client speaking garbage cannot be answered meaningfully; drop it.
      close_connection(fd);
      return;
    }
    c.in.erase(c.in.begin(), c.in.begin() + static_cast<ptrdiff_t>(pos));
    flush(fd);
  }

  void reply(Connection& c, WireWriter& w) {
    const auto& frame = w.frame();
    c.out.insert(c.out.end(), frame.begin(), frame.end());
  }

  void handle_request(int fd, Connection& c, const uint8_t* payload, size_t len) {
    WireReader r(payload, len);
    auto op = static_cast<StoreOp>(r.u8());
    ++requests;
    WireWriter w;
    switch (op) {
      case StoreOp::kSet: {
        std::string key = r.str();
        Bytes value = r.bytes();
        expect_end(r);
        data[key] = std::move(value);
        w.u8(uint8_t(ReplyStatus::kOk));
        reply(c, w);
        key_changed(key);
        return;
      }
      case StoreOp::kGet: {
        std::string key = r.str();
        int64_t timeout_ms = r.i64();
        expect_end(r);
        auto it = data.find(key);
        if (it == data.end()) return park(fd, op, {key}, timeout_ms);
        w.u8(uint8_t(ReplyStatus::kOk)).bytes(it->second);
        return reply(c, w);
      }
      case StoreOp::kAdd: {
        std::string key = r.str();
        int64_t delta = r.i64();
        expect_end(r);
        auto it = data.find(key);
        int64_t value = 0;
        try {
          value = (it == data.end() ? 0 : parse_counter(key, it->second)) + delta;
        } catch (const InvalidArgument& e) {
          w.u8(uint8_t(ReplyStatus::kInvalidArgument)).str(e.what());
          return reply(c, w);
        }
        data[key] = format_counter(value);
        w.u8(uint8_t(ReplyStatus::kOk)).i64(value);
        reply(c, w);
        key_changed(key);
        return;
      }
      case StoreOp::kCompareSet: {
        std::string key = r.str();
        Bytes expected = r.bytes();
        Bytes desired = r.bytes();
        expect_end(r);
        auto it = data.find(key);
        std::optional<Bytes> current;
        if (it != data.end()) current = it->second;
        if (auto to_store = compare_set_decision(current, expected, desired)) {
          data[key] = *to_store;
          w.u8(uint8_t(ReplyStatus::kOk)).bytes(*to_store);
          reply(c, w);
          key_changed(key);
          return;
        }
        w.u8(uint8_t(ReplyStatus::kOk)).bytes(current ? *current : Bytes{});
        return reply(c, w);
      }
      case StoreOp::kDelete: {
        std::string key = r.str();
        expect_end(r);
        w.u8(uint8_t(ReplyStatus::kOk)).u8(data.erase(key) ? 1 : 0);
        return reply(c, w);
      }
      case StoreOp::kCheck: {
        auto keys = r.strs();
        expect_end(r);
        w.u8(uint8_t(ReplyStatus::kOk)).u8(missing(keys).empty() ? 1 : 0);
        return reply(c, w);
      }
      case StoreOp::kWait: {
        auto keys = r.strs();
        int64_t timeout_ms = r.i64();
        expect_end(r);
        if (!missing(keys).empty()) return park(fd, op, std::move(keys), timeout_ms);
        w.u8(uint8_t(ReplyStatus::kOk));
        return reply(c, w);
      }
      case StoreOp::kNumKeys: {
        expect_end(r);
        int64_t count = 0;
        for (const auto& [key, value] : data) count += is_internal_key(key) ? 0 : 1;
        w.u8(uint8_t(ReplyStatus::kOk)).i64(count);
        return reply(c, w);
      }
    }
    throw Error("TCPStore: unknown request op " + std::to_string(int(op)));
  }

  std::vector<std::string> missing(const std::vector<std::string>& keys) const {
    std::vector<std::string> out;
    for (const auto& key : keys) {
      if (data.count(key) == 0) out.push_back(key);
    }
    return out;
  }

  void park(int fd, StoreOp op, std::vector<std::string> keys, int64_t timeout_ms) {
    auto deadline = deadline_after(std::chrono::milliseconds(std::max<int64_t>(timeout_ms, 0)));
    for (const auto& key : missing(keys)) waiting_on[key].insert(fd);
    parked[fd] = Parked{op, std::move(keys), deadline};
    ++parked_count;
  }

  void unpark(int fd) {
    auto it = parked.find(fd);
    for (const auto& key : it->second.keys) {
      auto w = waiting_on.find(key);
      if (w == waiting_on.end()) continue;
      w->second.erase(fd);
      if (w->second.empty()) waiting_on.erase(w);
    }
    parked.erase(it);
    --parked_count;
  }

  // A key was created or overwritten: answer the parked requests it completes.
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
    Parked& p = it->second;
    auto still_missing = missing(p.keys);
    if (!still_missing.empty()) {
      // Keys may have been deleted since the request was parked; watch whatever is missing now.
      for (const auto& key : still_missing) waiting_on[key].insert(fd);
      return;
    }
    WireWriter w;
    w.u8(uint8_t(ReplyStatus::kOk));
    if (p.op == StoreOp::kGet) w.bytes(data.at(p.keys.front()));
    reply(conns.at(fd), w);
    unpark(fd);
    runnable.push_back(fd);
  }

  void expire_parked() {
    if (parked.empty()) return;
    auto now = Clock::now();
    std::vector<int> expired;
    for (const auto& [fd, p] : parked) {
      if (p.deadline <= now) expired.push_back(fd);
    }
    for (int fd : expired) {
      auto keys = missing(parked.at(fd).keys);
      if (keys.empty()) {
        try_complete(fd);
        continue;
      }
      WireWriter w;
      w.u8(uint8_t(ReplyStatus::kTimeout)).strs(keys);
      reply(conns.at(fd), w);
      unpark(fd);
      runnable.push_back(fd);
    }
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

}  // namespace kolo::store_detail
