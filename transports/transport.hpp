// The transport interface, after Gloo's device -> pair -> buffer split.
//
// A Device is one transport's endpoint in this process (a TCP epoll set, a shared-memory
// segment, ...). It owns one Pair per peer it reaches. A Pair moves messages to and from one
// peer: post_send / post_recv of a byte range, completed later by the Device's poll().
// Messages on a pair match in posting order, per direction. Each message carries a Tag that is
// opaque here: the receive and the message it meets must have equal tags and equal sizes, or the
// receive fails with a mismatch that reports what arrived. Transports know nothing of
// collectives; the engine (src/engine) gives the tags their meaning.
#pragma once
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "transports/common/auth.hpp"

namespace kolo {
class Store;
}

namespace kolo::transport {

struct Tag {
  uint64_t w[3] = {0, 0, 0};
  bool operator==(const Tag& o) const { return w[0] == o.w[0] && w[1] == o.w[1] && w[2] == o.w[2]; }
};

enum class Failure : uint8_t {
  none,
  peer_closed,    // the connection ended without a goodbye: the peer died or was killed
  peer_aborted,   // the peer sent an abort notice; detail holds its reason
  tag_mismatch,   // the next message from the peer carries another tag
  size_mismatch,  // same tag, different size
  io_error,       // a system call failed; detail holds errno's text
  aborted,        // this process aborted the context
};
const char* failure_name(Failure f);

// One posted send or receive. Owned by the caller, which must keep it alive until it is no
// longer pending. Touched only by the thread that drives progress.
struct Request {
  enum class State : uint8_t { idle, pending, done, failed };
  State state = State::idle;
  Failure failure = Failure::none;
  int peer = -1;
  bool is_send = false;
  Tag tag;                // what was posted
  Tag got_tag;            // on a mismatch: what arrived
  size_t bytes = 0;       // posted size
  size_t got_bytes = 0;   // on a mismatch: the size that arrived
  size_t transferred = 0; // progress, for timeout messages
  std::string detail;

  // What every transport does when a request is posted, and when it fails.
  void start(int to_peer, bool send, const Tag& t, size_t n) {
    state = State::pending;
    failure = Failure::none;
    peer = to_peer;
    is_send = send;
    tag = t;
    bytes = n;
    got_bytes = 0;
    transferred = 0;
    detail.clear();  // keeps its capacity: no allocation on the next post
  }
  void fail(Failure why, std::string text) {
    state = State::failed;
    failure = why;
    detail = std::move(text);
  }
};

class Pair {
 public:
  virtual ~Pair() = default;
  virtual void post_send(const void* buf, size_t bytes, const Tag& tag, Request* req) = 0;
  virtual void post_recv(void* buf, size_t bytes, const Tag& tag, Request* req) = 0;
  // A look at the next incoming message that consumes nothing: true, with its tag and size,
  // when its header has arrived and no receive is posted on this pair (the message waits for
  // one). False when nothing has arrived, a receive is posted, or the pair failed. It moves
  // nothing itself (the device's poll() does); a receive posted afterwards gets the message
  // whole. This is how a receive from any source picks its peer without taking a message from
  // several (the engine's recv "any", src/algorithms/recv_any.cpp).
  virtual bool peek_incoming(Tag* tag, uint64_t* bytes) = 0;

  // The direct path: a small collective run to completion by the thread that issues it, while
  // its group has nothing else queued or running (src/engine/executor_direct.cpp). Neither
  // call blocks, fails or posts anything; each acts only while its direction of the pair has
  // nothing posted (so messages keep their posting order) and the pair is healthy, and otherwise
  // declines, leaving the caller to post the message the ordinary way. A transport that cannot
  // move a message at once keeps these defaults (Device::moves_now() says which do).
  // send_now: hands the whole message over now (sent: it is as good as a completed send), or
  // nothing of it: `full` when only room is missing (the peer has not yet taken earlier
  // messages: asking again later may succeed), `declined` otherwise.
  enum class Now : uint8_t { sent, full, declined };
  virtual Now send_now(const void* /*buf*/, size_t /*bytes*/, const Tag& /*tag*/) { return Now::declined; }
  // recv_now: true if the next incoming message has arrived whole and carries exactly `tag` and
  // `bytes`; with a non-null `buf` it is then copied there and consumed. Anything else (nothing
  // yet, a receive posted, another message, which a posted receive will report as a mismatch)
  // leaves the message where it is: false.
  virtual bool recv_now(void* /*buf*/, size_t /*bytes*/, const Tag& /*tag*/) { return false; }
  // The largest incoming message recv_now can ever take (shm: one ring slot's payload; 0: none),
  // so that a receive it never could is posted at once instead of being waited for in vain.
  virtual size_t recv_now_max_bytes() const { return 0; }
};

// Told by a device when a peer is lost; the engine turns the first report into the group's error.
class FailureSink {
 public:
  virtual ~FailureSink() = default;
  virtual void peer_failed(int peer, Failure why, const std::string& detail) = 0;
};

// What a transport needs to connect a group.
struct Bootstrap {
  Store* store = nullptr;
  std::string prefix;        // store keys of this group start with it
  int rank = 0;
  int size = 1;
  auth::Secret secret{};     // HMAC key: proved on every connection, never sent
  std::chrono::steady_clock::time_point deadline;
  std::string listen_addr;   // address to listen on / publish ("127.0.0.1" on one host)
  std::vector<std::string> host_ids;  // per rank: equal ids share a host
  FailureSink* failures = nullptr;
  // KOLO_CONNECT=lazy: connect() only prepares (listens, publishes its address) and each pair
  // connects on its first post_send/post_recv; the store must then outlive the device, which
  // looks peers up in it later. A transport for which connecting later makes no sense (shm:
  // its segments are made per process at setup) ignores it and connects at once.
  bool connect_lazily = false;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual const char* name() const = 0;
  virtual Pair* pair(int peer) = 0;  // null if this device does not reach `peer`
  // Moves whatever can move without blocking; true if any request changed state.
  virtual bool poll() = 0;
  // A file descriptor that becomes readable when poll() may have work, or -1 if the device
  // must be polled (busy-wait devices).
  virtual int wait_fd() const = 0;
  // Called just before the engine sleeps in poll(2) on wait_fd(): whatever this device waits
  // for must from now on make wait_fd() readable (shm: flags in shared memory that make peers
  // ring a doorbell). True when something moved meanwhile: do not sleep, poll again. The next
  // poll() undoes it. Busy ranks never call it, so the per-message path pays nothing for sleep.
  virtual bool prepare_sleep() { return false; }
  // Whether its pairs implement send_now / recv_now (the direct path), so that an engine that
  // reaches every peer through such devices may try it.
  virtual bool moves_now() const { return false; }
  // pair(peer) returns the same Pair for the device's whole life (all connected at setup), so a
  // caller may keep the pointer. False where a connection opens on first use and its pair
  // changes (TCP's on-demand connect).
  virtual bool pairs_fixed() const { return false; }
  // Best effort, bounded: tells every peer this process aborts, with `reason`, and fails every
  // pending request with Failure::aborted. The connections themselves stay open where they can
  // still carry a whole frame (see hand_over); the peers learn of the abort from the notice.
  virtual void abort(const std::string& reason) = 0;

  // Carrying connections over into a re-formed group (ProcessGroup::shrink): the default is that
  // a transport cannot, and the new group connects anew. One that can says which of its pairs
  // are still whole after this device's abort (reusable_peers: connected, not hung up, no frame
  // of the old group cut off halfway), and hand_over then moves those to a new device of the
  // same transport. Asked only once this device has aborted (abort() has run) and nothing else
  // polls it; the engine hands over only pairs that both ends offered (through the store).
  virtual std::vector<int> reusable_peers() const { return {}; }
  // Moves the pairs of `keep` ({this device's peer, its rank in the new group}) to a new device
  // for the group `boot` describes (its rank, size, failure sink, deadline; its prefix names
  // the resynchronisation), after resynchronising with each peer: each side sends a marker that
  // ends the old group's bytes on the connection, and drops everything the peer sent before the
  // peer's marker (a message the old group was half-way through is dropped whole), so that the
  // new group's first byte is the first byte after the markers. Both ends run it at the same
  // time; bounded by boot.deadline. Throws (naming the peer) when a peer closes the connection
  // or does not answer in time; the pairs not named in `keep` stay here, failed, and close with
  // this device.
  struct Handover {
    Bootstrap boot;
    std::vector<std::pair<int, int>> keep;
  };
  virtual std::unique_ptr<Device> hand_over(const Handover& /*h*/) { return nullptr; }
  // Orderly close: flushes, says goodbye to every peer and waits (until `deadline`) for their
  // goodbyes. Returns the peers that did not say goodbye in time.
  virtual std::vector<int> close(std::chrono::steady_clock::time_point deadline) = 0;
};

// A transport as the registry (registry.cpp) lists it. Each transport registers itself, in its
// own folder, with KOLO_REGISTER_TRANSPORT; the folder's name in kolo_transports (top-level
// meson.build) builds it. Adding a transport: the folder and that one line
// (tests/transports/extra_transport_test.cpp registers one from outside libkolo).
struct TransportInfo {
  const char* name;
  // The highest-priority transport that reaches a peer carries its messages. Priorities are
  // distinct (the registry refuses a taken one) and fix the registry's order, lowest first, the
  // same in every process whatever order the linker ran the registrations in.
  int priority;
  // Whether this transport can carry messages between bootstrap.rank and `peer`.
  bool (*reaches)(const Bootstrap& b, int peer);
  // Connects this rank to `peers` (every one of them calls it with this rank among its peers),
  // or, with Bootstrap::connect_lazily, makes them reachable: pair(peer) then returns a pair whose
  // first post opens the connection.
  std::unique_ptr<Device> (*connect)(const Bootstrap& b, const std::vector<int>& peers);
};

// Adds a transport to the registry while the library loads; aborts on a taken name or priority.
struct TransportRegistration {
  explicit TransportRegistration(const TransportInfo& t);
};

// In a transport's file, at namespace scope:
//   KOLO_REGISTER_TRANSPORT(tcp, {"tcp", 10, &TcpDevice::reaches, &TcpDevice::connect});
#define KOLO_REGISTER_TRANSPORT(id, ...) \
  static const ::kolo::transport::TransportRegistration kolo_transport_##id##_registration { __VA_ARGS__ }

// Every registered transport, lowest priority first.
const std::vector<TransportInfo>& all_transports();
const TransportInfo* find_transport(const std::string& name);

}  // namespace kolo::transport
