#include "store/tcp_store_server.hpp"

#include <arpa/inet.h>
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
#include <map>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "common/log.hpp"
#include "kolo/error.hpp"
#include "store/store_auth.hpp"
#include "store/store_common.hpp"
#include "common/tls.hpp"
#include "store/store_socket.hpp"
#include "store/tcp_store_state.hpp"
#include "store/tcp_store_wire.hpp"

namespace kolo::store_detail {

namespace {

struct Connection {
  std::vector<uint8_t> in;   // bytes received and not yet parsed into requests
  std::vector<uint8_t> out;  // replies not yet written
  size_t out_sent = 0;
  bool watching_writable = false;
  Hello hello = Hello::kUnknown;
  // Set while the connection has yet to authenticate (only when the server has a key): then
  // nothing but the handshake's bytes is read from it, and nothing is served.
  std::unique_ptr<auth::ServerHandshake> gate;
  Clock::time_point auth_deadline{};
  uint64_t accepted_seq = 0;  // which pending connection is the oldest
  std::unique_ptr<TlsSession> tls;  // KOLO_TLS=1: every byte in and out through it
};

}  // namespace

struct TcpStoreServerCore::Loop {
  int listen_fd = -1;
  int epoll_fd = -1;
  int wake_fd = -1;  // eventfd: the destructor's way to interrupt epoll_wait
  uint16_t port = 0;
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> requests{0};      // mirrors of state's counters, for other threads
  std::atomic<uint64_t> parked_count{0};
  std::atomic<uint64_t> connection_count{0};
  std::atomic<uint64_t> dropped_count{0};
  std::atomic<uint64_t> refused_count{0};
  std::atomic<uint64_t> pending_count{0};
  std::thread thread;
  std::optional<auth::Key> key;  // set: every connection must authenticate first
  std::shared_ptr<const TlsContext> tls;  // set: every connection in TLS
  std::chrono::milliseconds auth_deadline = TcpStoreServerCore::kAuthDeadline;
  uint64_t accepted = 0;
  // Connections still authenticating, oldest first (accept order = deadline order): the
  // deadline and the limit look at the front only, so a flood costs O(log n) per connection.
  std::map<uint64_t, int> pending_by_age;

  std::unordered_map<int, Connection> conns;
  StoreState state;  // keys, queues, parked WAITs: the protocol, without sockets

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
      // ... except connections still authenticating, which have a deadline.
      int n = ::epoll_wait(epoll_fd, events, 64, auth_wait_ms());
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
          // TLS: bytes that OpenSSL holds already decrypted raise no epoll event (the handshake
          // step reads no more than it needs): serve them now. Each pass consumes, so a few do.
          for (int pass = 0; pass < 16 && open && conns.count(fd) && conns.at(fd).tls && conns.at(fd).tls->buffered(); ++pass) {
            open = read_available(fd);
            if (conns.count(fd)) process_input(fd);
          }
          if (!open && conns.count(fd)) {
            // Hanging up mid-handshake is how a client refuses a server whose proof is wrong
            // (another job's secret): worth the same warning as a refusal here.
            if (conns.at(fd).gate) {
              refuse(fd, "hung up before authenticating (a client with another job's secret, or a port scan)");
            } else {
              close_connection(fd);
            }
          }
        } else if (ev & EPOLLOUT) {
          flush(fd);
        }
      }
      if (pending_count > 0) expire_authentications();
    }
  }

  // Milliseconds until the first authentication deadline; -1 (forever) when none is pending.
  int auth_wait_ms() {
    if (pending_by_age.empty()) return -1;
    return static_cast<int>(remaining(conns.at(pending_by_age.begin()->second).auth_deadline).count());
  }

  void expire_authentications() {
    const auto now = Clock::now();
    while (!pending_by_age.empty()) {
      const int fd = pending_by_age.begin()->second;
      if (conns.at(fd).auth_deadline > now) return;
      refuse(fd, "did not authenticate within " + std::to_string(auth_deadline.count()) + " ms");
    }
  }

  // Too many connections authenticating at once: the oldest goes, so that a flood of silent
  // connections cannot lock real clients out (they authenticate in one round trip).
  void limit_pending() {
    while (pending_by_age.size() > TcpStoreServerCore::kMaxPendingAuth) {
      refuse(pending_by_age.begin()->second, "still unauthenticated when more than " + std::to_string(TcpStoreServerCore::kMaxPendingAuth) +
                         " connections were authenticating at once (the oldest is dropped)");
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
      Connection& c = conns.emplace(fd, Connection{}).first->second;
      watch(fd, EPOLLIN, EPOLL_CTL_ADD);
      ++connection_count;
      if (tls) c.tls = std::make_unique<TlsSession>(*tls, fd, false, tls_peer_name("store client", fd));
      if (key) {
        c.gate = std::make_unique<auth::ServerHandshake>(*key, auth::fresh_nonce());
        c.auth_deadline = deadline_after(auth_deadline);
        c.accepted_seq = ++accepted;
        pending_by_age.emplace(c.accepted_seq, fd);
        ++pending_count;
        limit_pending();
      }
    }
  }

  void close_connection(int fd) {
    conns.at(fd).tls.reset();
    end_pending(fd);
    state.forget(fd);
    parked_count = state.parked();
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
      // Before authentication, no more than the handshake's current step asks for: the rest
      // stays in the kernel (epoll reports it again) until the peer has proved the secret.
      const size_t limit = c.gate ? c.gate->wanted() - c.in.size() : sizeof(buf);
      ssize_t n = c.tls ? c.tls->read(buf, limit) : ::recv(fd, buf, limit, 0);
      if (n > 0) {
        c.in.insert(c.in.end(), buf, buf + n);
        if (c.gate) {
          if (c.in.size() == c.gate->wanted()) return true;  // the step is complete: judge it
          continue;
        }
        if (c.in.size() > kMaxValueBytes + 2 * kMaxKeyBytes + 64) {
          drop(fd, "more unparsed input than any request can hold");
          return false;
        }
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      if (n < 0 && c.tls && !c.tls->error().empty()) refuse(fd, c.tls->error());  // logged with its address
      return false;
    }
  }

  void drop(int fd, const std::string& why) {
    ++dropped_count;
    // Rate-limited: a port scanner must not flood the log.
    if (dropped_count <= 10) {
      std::fprintf(stderr, "kolo TCPStore server on port %u: dropped client %s: %s%s\n", unsigned(port),
                   peer_address(fd).c_str(), why.c_str(),
                   dropped_count == 10 ? " (further drops are counted, not logged)" : "");
    }
    close_connection(fd);
  }

  // A connection failed authentication: logged as a warning with its address (rate-limited, so
  // that a scanner cannot flood the log; the count is kept), then dropped. The server goes on.
  void refuse(int fd, const std::string& why) {
    const uint64_t n = ++refused_count;
    if (n <= 20 || n % 1000 == 0) {
      KOLO_LOG(warn, "TCPStore server on port " << port << ": refused unauthenticated client " << peer_address(fd)
                                                << ": " << why
                                                << (n == 20 ? " (further refusals are logged every 1000th)"
                                                            : n > 20 ? " (" + std::to_string(n) + " refused so far)"
                                                                     : std::string()));
    }
    ++dropped_count;
    close_connection(fd);
  }

  // Runs the handshake's step on what read_available gathered. True once the connection is
  // authenticated (its later bytes are then c10d requests); false while it is not, or when it
  // was refused and is gone.
  bool authenticate(int fd) {
    Connection& c = conns.at(fd);
    if (c.in.empty()) return false;
    std::string why;
    auto step = c.gate->feed(c.in.data(), c.in.size(), c.out, why);
    c.in.clear();
    if (step == auth::ServerHandshake::Step::kRefused) {
      refuse(fd, why);
      return false;
    }
    flush(fd);  // the server's nonce and proof
    if (conns.count(fd) == 0) return false;
    if (step == auth::ServerHandshake::Step::kNeedMore) return false;
    end_pending(fd);
    return true;
  }

  // The connection no longer authenticates (it has, or it is closing).
  void end_pending(int fd) {
    Connection& c = conns.at(fd);
    if (!c.gate) return;
    pending_by_age.erase(c.accepted_seq);
    c.gate.reset();
    --pending_count;
  }

  static std::string peer_address(int fd) {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    char host[INET6_ADDRSTRLEN] = "?";
    uint16_t peer_port = 0;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      if (addr.ss_family == AF_INET) {
        auto* in = reinterpret_cast<sockaddr_in*>(&addr);
        ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
        peer_port = ntohs(in->sin_port);
      } else if (addr.ss_family == AF_INET6) {
        auto* in6 = reinterpret_cast<sockaddr_in6*>(&addr);
        ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
        peer_port = ntohs(in6->sin6_port);
      }
    }
    return std::string(host) + ":" + std::to_string(peer_port);
  }

  // Serves every complete request buffered on fd, then writes the replies, and the STOP_WAITING
  // owed to connections whose WAIT those requests completed. As in c10d's servers, a parked WAIT
  // does not hold back later requests: torch 1.13's client gives up on a WAIT by its own socket
  // timeout and goes on with the next request on the same connection.
  void process_input(int fd) {
    if (conns.at(fd).gate && !authenticate(fd)) return;
    Connection& c = conns.at(fd);
    size_t used = 0;
    try {
      used = state.serve(fd, c.hello, c.in.data(), c.in.size(), c.out);
    } catch (const std::exception& e) {
      drop(fd, e.what());
      used = SIZE_MAX;
    }
    // The mirrors first: a client that has its reply sees them counted.
    requests = state.requests();
    parked_count = state.parked();
    if (used != SIZE_MAX) {
      c.in.erase(c.in.begin(), c.in.begin() + static_cast<ptrdiff_t>(used));
      flush(fd);
    }
    for (int woken : state.take_woken()) {
      auto it = conns.find(woken);
      if (it == conns.end()) continue;
      it->second.out.push_back(kStopWaiting);
      flush(woken);
    }
  }

  // Writes queued replies; watches for writability only while some remain.
  void flush(int fd) {
    Connection& c = conns.at(fd);
    while (c.out_sent < c.out.size()) {
      iovec iov{c.out.data() + c.out_sent, c.out.size() - c.out_sent};
      ssize_t n = c.tls ? c.tls->writev(&iov, 1) : ::send(fd, iov.iov_base, iov.iov_len, MSG_NOSIGNAL);
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

std::unique_ptr<TcpStoreServerCore> TcpStoreServerCore::start(const std::string& host, uint16_t port,
                                                              std::optional<auth::Key> key,
                                                              std::chrono::milliseconds auth_deadline,
                                                              std::shared_ptr<const TlsContext> tls) {
  auto loop = std::make_unique<Loop>();
  loop->key = key;
  loop->tls = std::move(tls);
  loop->auth_deadline = auth_deadline;
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
uint64_t TcpStoreServerCore::refused_connections() const { return loop_->refused_count; }
uint64_t TcpStoreServerCore::pending_authentications() const { return loop_->pending_count; }

}  // namespace kolo::store_detail
