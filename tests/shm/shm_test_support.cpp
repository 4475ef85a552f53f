#include "shm_test_support.hpp"

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <thread>

#include "common/config.hpp"
#include "transports/shm/shm_device.hpp"
#include "transports/shm/shm_segment.hpp"

namespace kolo::shmtest {

void Sink::peer_failed(int p, Failure w, const std::string& d) {
  std::lock_guard<std::mutex> lk(mu);
  ++reports;
  if (why != Failure::none) return;
  peer = p;
  why = w;
  detail = d;
}

Failure Sink::first() const {
  std::lock_guard<std::mutex> lk(mu);
  return why;
}

transport::Bootstrap make_bootstrap(Store& store, int rank, int size, Sink* sink, uint8_t secret_byte,
                                    std::chrono::milliseconds timeout, const std::string& prefix) {
  transport::Bootstrap b;
  b.store = &store;
  b.prefix = prefix;
  b.rank = rank;
  b.size = size;
  b.secret.fill(secret_byte);
  b.deadline = Clock::now() + timeout;
  b.listen_addr = "127.0.0.1";
  b.host_ids.assign(static_cast<size_t>(size), "this-host");
  b.failures = sink;
  return b;
}

std::vector<std::unique_ptr<Rank>> connect_threads(int size, const ConnectRank& connect) {
  auto store = make_hash_store();
  std::vector<std::unique_ptr<Rank>> ranks;
  for (int r = 0; r < size; ++r) ranks.push_back(std::make_unique<Rank>());
  std::vector<std::thread> ts;
  std::mutex mu;
  std::string error;
  for (int r = 0; r < size; ++r)
    ts.emplace_back([&, r] {
      std::vector<int> peers;
      for (int p = 0; p < size; ++p)
        if (p != r) peers.push_back(p);
      try {
        Rank& me = *ranks[static_cast<size_t>(r)];
        me.dev = connect(*store, me, r, peers);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lk(mu);
        error += "rank " + std::to_string(r) + ": " + e.what() + "\n";
      }
    });
  for (auto& t : ts) t.join();
  if (!error.empty()) throw std::runtime_error("connecting " + std::to_string(size) + " ranks failed:\n" + error);
  return ranks;
}

std::vector<std::unique_ptr<Rank>> connect_all(int size) {
  return connect_threads(size, [size](Store& store, Rank& me, int r, const std::vector<int>& peers) {
    return shm::ShmDevice::connect(make_bootstrap(store, r, size, &me.sink), peers);
  });
}

std::vector<std::string> exchange_every_size(std::vector<std::unique_ptr<Rank>>& ranks, const std::vector<size_t>& sizes,
                                             std::chrono::milliseconds timeout,
                                             const std::function<std::string(transport::Device&)>& then) {
  std::vector<std::string> errors(2);
  auto run = [&](int me) {
    const int other = 1 - me;
    std::string& error = errors[static_cast<size_t>(me)];
    auto& dev = *ranks[static_cast<size_t>(me)]->dev;
    std::vector<std::vector<uint8_t>> out, in;
    std::vector<Request> sreq(sizes.size()), rreq(sizes.size());
    std::vector<Request*> all;
    for (size_t i = 0; i < sizes.size(); ++i) {
      out.push_back(pattern(sizes[i], static_cast<uint64_t>(me * 1000 + i)));
      in.emplace_back(sizes[i], 0xEE);
    }
    for (size_t i = 0; i < sizes.size(); ++i) {
      dev.pair(other)->post_recv(in[i].data(), sizes[i], tag(100 + i), &rreq[i]);
      dev.pair(other)->post_send(out[i].data(), sizes[i], tag(100 + i), &sreq[i]);
      all.push_back(&rreq[i]);
      all.push_back(&sreq[i]);
    }
    if (!drive(dev, all, timeout).finished) error += "requests did not complete; ";
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (sreq[i].state != Request::State::done || rreq[i].state != Request::State::done)
        error += "size " + std::to_string(sizes[i]) + " not done (" + rreq[i].detail + sreq[i].detail + "); ";
      else if (in[i] != pattern(sizes[i], static_cast<uint64_t>(other * 1000 + i)))
        error += "payload of size " + std::to_string(sizes[i]) + " differs; ";
    }
    if (then) error += then(dev);
  };
  std::thread t([&] { run(1); });
  run(0);
  t.join();
  return errors;
}

DriveStats drive(transport::Device& dev, const std::vector<Request*>& reqs, std::chrono::milliseconds timeout,
                 std::chrono::milliseconds sleep_cap) {
  DriveStats st;
  auto start = Clock::now();
  auto deadline = start + timeout;
  for (;;) {
    bool pending = false;
    for (auto* r : reqs) pending |= r->state == Request::State::pending;
    if (!pending) {
      st.finished = true;
      break;
    }
    if (Clock::now() >= deadline) break;
    if (dev.poll()) continue;
    if (dev.prepare_sleep()) continue;
    int fd = dev.wait_fd();
    if (fd < 0) continue;
    pollfd pf{fd, POLLIN, 0};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    int ms = static_cast<int>(std::max<long long>(0, std::min<long long>(left, sleep_cap.count())));
    auto before = Clock::now();
    ::poll(&pf, 1, ms);
    if (Clock::now() - before > 200us) ++st.sleeps;
  }
  st.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return st;
}

Tag tag(uint64_t a) {
  Tag t;
  t.w[0] = a;
  t.w[1] = a * 3 + 1;
  t.w[2] = ~a;
  return t;
}

size_t table_default(const char* name) {
  for (const auto& t : config::tunables())
    if (std::string(t.name) == name) return static_cast<size_t>(std::stoull(t.default_value));
  throw std::logic_error(std::string("no tunable ") + name);
}

std::vector<size_t> boundary_sizes() {
  const size_t slot = table_default("KOLO_SHM_SLOT_BYTES");
  const size_t payload = slot - 64;
  const size_t cma = table_default("KOLO_SHM_CMA_MIN_BYTES");
  return {0, 1, 63, 64, 4095, payload - 1, payload, payload + 1, slot - 1, slot + 1, cma - 1, cma, cma + 1,
          size_t(1) << 20, (size_t(8) << 20) + 5};
}

std::vector<uint8_t> pattern(size_t bytes, uint64_t seed) {
  std::vector<uint8_t> v(bytes);
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + bytes + 1;
  for (size_t i = 0; i < bytes; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v[i] = static_cast<uint8_t>(x);
  }
  return v;
}

const std::string& job_id() {
  static const std::string id = [] {
    std::string j = "shmtest" + std::to_string(::getpid());
    ::setenv("KOLO_JOB_ID", j.c_str(), 1);
    return j;
  }();
  return id;
}

std::vector<std::string> leftover_segments() {
  std::vector<std::string> found;
  const std::string want = std::string(shm::kNamePrefix) + job_id() + "-";
  DIR* d = ::opendir(shm::kShmDir);
  if (!d) return found;
  while (dirent* e = ::readdir(d))
    if (std::string(e->d_name).rfind(want, 0) == 0) found.push_back(e->d_name);
  ::closedir(d);
  return found;
}

ScopedEnv::ScopedEnv(const char* name, const std::string& value) : name_(name) {
  if (const char* v = std::getenv(name)) {
    had_ = true;
    old_ = v;
  }
  ::setenv(name, value.c_str(), 1);
}

ScopedEnv::~ScopedEnv() {
  if (had_) ::setenv(name_.c_str(), old_.c_str(), 1);
  else ::unsetenv(name_.c_str());
}

pid_t fork_rank(const std::function<int()>& body) {
  std::cout.flush();
  std::cerr.flush();
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  int code = 1;
  try {
    code = body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "forked rank: %s\n", e.what());
  }
  std::fflush(stderr);
  ::_exit(code);
}

int wait_child(pid_t pid, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0) return -1;
    if (Clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(2ms);
  }
}

std::string fresh_store_path() {
  static std::atomic<int> n{0};
  const char* tmp = std::getenv("TMPDIR");
  return std::string(tmp && *tmp ? tmp : "/tmp") + "/kolo-shm-test-store-" + std::to_string(::getpid()) + "-" +
         std::to_string(n++);
}

}  // namespace kolo::shmtest
