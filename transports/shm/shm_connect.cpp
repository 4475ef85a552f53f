// Setting up the shared-memory transport for a group's local peers:
//   1. create this rank's segment (one inbound ring per peer) and listen on an abstract socket;
//   2. publish both names in the store under <prefix>/shm/<rank>;
//   3. map every peer's segment and find the ring addressed to us there;
//   4. connect the control sockets (lower rank connects to higher) with a hello that checks the
//      group and proves the job secret both ways, like TCP's (challenge-response over the nonce
//      each rank published in step 2); a peer's hello proves it has mapped our segment;
//   5. unlink our segment's name: from here on nothing is left in /dev/shm whatever happens;
//   6. probe cross-memory attach both ways and tell each peer whether we can read it.
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "common/log.hpp"
#include "common/config.hpp"
#include "kolo/error.hpp"
#include "kolo/store.hpp"
#include "kolo/version.hpp"
#include "transports/common/auth.hpp"
#include "transports/common/seqpacket.hpp"
#include "transports/seqpacket_handshake.hpp"
#include "transports/setup_failure.hpp"
#include "transports/shm/shm_device.hpp"
#include "transports/shm/shm_fence.hpp"
#include "transports/common/setup_text.hpp"

namespace kolo::shm {

using transport::Bootstrap;
using transport::HelloStatus;
namespace seqpacket = transport::seqpacket;

// Who the control socket's errors name.
constexpr const char* kWho = "shm transport";
constexpr seqpacket::HandshakeNames kNames{kWho, "shm", "shared-memory", "shm", static_cast<uint32_t>(kProtocolVersion),
                                           kHelloMagic};

namespace {

struct Geometry {
  size_t slot_bytes;
  size_t nslots;
  size_t cma_min_bytes;
  bool cma_help;  // KOLO_SHM_CMA_HELP
};

Geometry geometry_from_config() {
  int64_t slot = config::get_int("KOLO_SHM_SLOT_BYTES");
  int64_t n = config::get_int("KOLO_SHM_SLOTS");
  int64_t cma = config::get_int("KOLO_SHM_CMA_MIN_BYTES");
  if (slot < 128 || slot > (int64_t(1) << 30) || slot % static_cast<int64_t>(kLine) != 0)
    throw InvalidArgument("KOLO_SHM_SLOT_BYTES=" + std::to_string(slot) + " must be a multiple of 64 between 128 and 1G");
  if (n < 2 || n > (int64_t(1) << 20))
    throw InvalidArgument("KOLO_SHM_SLOTS=" + std::to_string(n) + " must be between 2 and 1048576");
  if (cma < 0) throw InvalidArgument("KOLO_SHM_CMA_MIN_BYTES=" + std::to_string(cma) + " must not be negative");
  return Geometry{static_cast<size_t>(slot), static_cast<size_t>(n), static_cast<size_t>(cma),
                  config::get_int("KOLO_SHM_CMA_HELP") != 0};
}

std::string hex(uint64_t v, int digits) {
  static const char* d = "0123456789abcdef";
  std::string s(static_cast<size_t>(digits), '0');
  for (int i = digits - 1; i >= 0; --i, v >>= 4) s[static_cast<size_t>(i)] = d[v & 15];
  return s;
}

// The job part of our names: KOLO_JOB_ID (set by kolorun for every launch) when it is there,
// else a hash of the store prefix's first component. Either way the pid follows, so two jobs
// that share both still never collide.
std::string job_part(const std::string& prefix) {
  const std::string id = config::get_string("KOLO_JOB_ID");
  std::string job;
  for (const char* c = id.c_str(); *c && job.size() < 32; ++c)
    if (std::isalnum(static_cast<unsigned char>(*c)) || *c == '_') job += *c;
  if (!job.empty()) return job;
  char buf[24];
  std::snprintf(buf, sizeof buf, "s%08llx",
                static_cast<unsigned long long>(transport::group_hash(prefix.substr(0, prefix.find('/'))) & 0xffffffffu));
  return buf;
}

std::string base_name(const Bootstrap& b) {
  return std::string(kNamePrefix) + job_part(b.prefix) + "-" + hex(transport::group_hash(b.prefix), 12) + "-r" +
         std::to_string(b.rank) + "-" + std::to_string(::getpid());
}

std::string store_key(const Bootstrap& b, int rank) { return b.prefix + "/shm/" + std::to_string(rank); }

// Finds the ring that `sender` writes in a segment owned by `owner`, checking the layout.
RingView find_ring(const Segment& seg, int owner, int sender) {
  const std::string where = "shared-memory segment " + std::string(kShmDir) + seg.name() + " of rank " + std::to_string(owner);
  if (seg.size() < kSegmentHeaderBytes) throw Error("shm transport: " + where + " is too small");
  auto* hdr = reinterpret_cast<const SegmentHeader*>(seg.base());
  if (hdr->magic != kSegmentMagic || hdr->version != kLayoutVersion)
    throw Error("shm transport: " + where + " has an unknown layout (mixed kolo versions?)");
  if (hdr->owner_rank != owner || hdr->total_bytes != seg.size() ||
      kSegmentHeaderBytes + hdr->nrings * hdr->ring_bytes > seg.size())
    throw Error("shm transport: " + where + " is inconsistent");
  for (uint32_t i = 0; i < hdr->nrings; ++i) {
    char* base = seg.base() + kSegmentHeaderBytes + i * hdr->ring_bytes;
    auto* ctl = reinterpret_cast<RingControl*>(base);
    if (ctl->sender_rank != sender) continue;
    if (ctl->receiver_rank != owner || ctl->slot_bytes < 2 * kLine || ctl->slot_bytes % kLine != 0 || ctl->nslots < 2 ||
        ring_bytes(ctl->slot_bytes, ctl->nslots) > hdr->ring_bytes)
      throw Error("shm transport: " + where + " has a malformed ring for rank " + std::to_string(sender));
    return RingView{ctl, base + kRingControlBytes, ctl->slot_bytes, ctl->nslots};
  }
  throw Error("shm transport: " + where + " has no ring for rank " + std::to_string(sender) +
              " (do the ranks disagree about which of them share this host?)");
}

// Whether we can read `pid`'s memory at `addr` and find `value` there.
bool probe_remote_read(pid_t pid, uint64_t addr, uint64_t value, int* err) {
  uint64_t got = 0;
  iovec local{&got, sizeof got};
  iovec remote{reinterpret_cast<void*>(addr), sizeof got};
  ssize_t n = ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
  *err = n < 0 ? errno : 0;
  return n == static_cast<ssize_t>(sizeof got) && got == value;
}

void log_fallback_once(int peer, int err) {
  static std::atomic<bool> logged{false};
  if (logged.exchange(true)) return;
  KOLO_LOG(info, "shm: cannot read rank " << peer << "'s memory with process_vm_readv ("
                                          << (err ? transport::errno_text(err) : std::string("wrong value read back"))
                                          << "); large messages go through the shared-memory rings instead");
}

}  // namespace

std::unique_ptr<transport::Device> ShmDevice::connect(const Bootstrap& b, const std::vector<int>& peers) {
  // Should the setup fail, no group forms and nobody needs the peers' segment names any more:
  // unlinking them also removes the segment of a peer that was killed before every rank had
  // attached (its own unlink never came). The reason goes to the store first.
  // Our own segment is unlinked (with `dev`) only after the reason is out, too.
  std::unique_ptr<ShmDevice> dev(new ShmDevice(b.size, b.failures));
  std::vector<std::string> peer_names;
  try {
    connect_or_throw(b, peers, dev.get(), &peer_names);
    return dev;
  } catch (const std::exception& e) {
    transport::publish_setup_failure(b, e.what());
    dev.reset();
    for (const auto& n : peer_names) ::shm_unlink(n.c_str());
    throw;
  }
}

void ShmDevice::connect_or_throw(const Bootstrap& b, const std::vector<int>& peers, ShmDevice* dev,
                                 std::vector<std::string>* peer_names) {
  const Geometry g = geometry_from_config();
  const size_t nrings = peers.size();
  const size_t ring_size = ring_bytes(g.slot_bytes, g.nslots);
  const size_t total = segment_bytes(nrings, g.slot_bytes, g.nslots);

  // 1. Our segment and listening socket, under a name nobody else holds.
  Fd listener;
  std::string seg_name, sock_name;
  const std::string base = base_name(b);
  for (int attempt = 0; attempt < 16 && !listener.valid(); ++attempt) {
    std::string name = attempt == 0 ? base : base + "-" + std::to_string(attempt);
    Segment seg = Segment::create("/" + name, total);
    if (!seg.valid()) continue;  // left over from a killed process whose pid came back
    listener = seqpacket::listen_abstract(kWho, name);
    if (!listener.valid()) continue;
    *dev->own_ = std::move(seg);
    seg_name = "/" + name;
    sock_name = name;
  }
  if (!listener.valid()) throw Error("shm transport: no free shared-memory name starting with " + base);
  {
    auto* hdr = new (dev->own_->base()) SegmentHeader{};
    hdr->magic = kSegmentMagic;
    hdr->version = kLayoutVersion;
    hdr->owner_rank = b.rank;
    hdr->nrings = static_cast<uint32_t>(nrings);
    hdr->total_bytes = total;
    hdr->ring_bytes = ring_size;
    dev->waiter_membarrier_ = asymmetric_fences();
    hdr->flags = dev->waiter_membarrier_ ? uint32_t{kWaiterUsesMembarrier} : uint32_t{0};
  }
  std::vector<RingView> inbound(static_cast<size_t>(b.size));
  for (size_t i = 0; i < nrings; ++i) {
    char* ring = dev->own_->base() + kSegmentHeaderBytes + i * ring_size;
    auto* ctl = new (ring) RingControl{};  // the pages are zero: every counter and flag starts at 0
    ctl->sender_rank = peers[i];
    ctl->receiver_rank = b.rank;
    ctl->slot_bytes = static_cast<uint32_t>(g.slot_bytes);
    ctl->nslots = static_cast<uint32_t>(g.nslots);
    inbound[static_cast<size_t>(peers[i])] = RingView{ctl, ring + kRingControlBytes, ctl->slot_bytes, ctl->nslots};
    prefault(ring, ring_size);
  }

  // 2. Publish, with this setup's nonce that every connector's proof must cover; the segment is
  //    complete before anyone can find it.
  const transport::auth::Nonce my_nonce = transport::auth::fresh_nonce();
  b.store->set(store_key(b, b.rank), seg_name + "\n" + sock_name + "\n" + transport::auth::to_hex(my_nonce));

  // 3. Map the peers' segments.
  std::vector<RingView> outbound(static_cast<size_t>(b.size));
  std::vector<std::string> peer_socket(static_cast<size_t>(b.size));
  std::vector<transport::auth::Nonce> peer_nonce(static_cast<size_t>(b.size));
  std::vector<bool> peer_membarrier(static_cast<size_t>(b.size), false);
  for (int peer : peers) {
    std::string info = b.store->get_string(store_key(b, peer));
    auto nl = info.find('\n');
    auto nl2 = nl == std::string::npos ? nl : info.find('\n', nl + 1);
    if (nl2 == std::string::npos || !transport::auth::from_hex(info.substr(nl2 + 1), &peer_nonce[static_cast<size_t>(peer)]))
      throw Error("shm transport: malformed store entry " + store_key(b, peer) + " (mixed kolo versions?)");
    peer_names->push_back(info.substr(0, nl));
    Segment seg = Segment::open(info.substr(0, nl), "rank " + std::to_string(peer));
    outbound[static_cast<size_t>(peer)] = find_ring(seg, peer, b.rank);
    peer_membarrier[static_cast<size_t>(peer)] =
        (reinterpret_cast<const SegmentHeader*>(seg.base())->flags & kWaiterUsesMembarrier) != 0;
    // Only our ring: the rest of the peer's segment is other senders' (at 64 ranks a whole
    // segment is 63 rings).
    prefault(reinterpret_cast<char*>(outbound[static_cast<size_t>(peer)].ctl),
             ring_bytes(outbound[static_cast<size_t>(peer)].slot_bytes, outbound[static_cast<size_t>(peer)].nslots));
    peer_socket[static_cast<size_t>(peer)] = info.substr(nl + 1, nl2 - nl - 1);
    dev->peers_.push_back(std::make_shared<Segment>(std::move(seg)));
  }

  // 4. Control sockets, authenticated (transports/seqpacket_handshake.hpp); each hello
  //    also carries the word the peer may try to read with process_vm_readv.
  const uint64_t* probe = &dev->probe_word_;
  const seqpacket::Handshake<Hello> handshake(b, kNames, my_nonce, [probe](Hello& h) {
    h.probe_addr = reinterpret_cast<uint64_t>(probe);
    h.probe_value = *probe;
  });
  auto [socks, their] = handshake.run(peers, listener.get(), peer_socket, peer_nonce);

  // 5. Every peer sent its hello after mapping our segment: the name can go.
  dev->own_->unlink();

  // 6. Cross-memory attach, both ways.
  std::vector<pid_t> pids(static_cast<size_t>(b.size), -1);
  std::vector<bool> we_read(static_cast<size_t>(b.size), false);
  for (int peer : peers) {
    const Hello& h = their[static_cast<size_t>(peer)];
    pid_t pid = seqpacket::peer_pid(socks[static_cast<size_t>(peer)].get());
    pids[static_cast<size_t>(peer)] = pid;
    int err = 0;
    bool can = pid > 0 && probe_remote_read(pid, h.probe_addr, h.probe_value, &err);
    if (!can) log_fallback_once(peer, err);
    we_read[static_cast<size_t>(peer)] = can;
    Ready r{kReadyMagic, can ? 1u : 0u};
    seqpacket::send_record_until(kWho, socks[static_cast<size_t>(peer)].get(), &r, sizeof r, b.deadline);
  }
  for (int peer : peers) {
    Ready r{};
    size_t got = 0;
    try {
      got = seqpacket::recv_record_until(kWho, socks[static_cast<size_t>(peer)].get(), &r, sizeof r, b.deadline);
    } catch (const TimeoutError&) {
      throw TimeoutError("rank " + std::to_string(peer) + " did not finish the shared-memory setup with rank " +
                         std::to_string(b.rank) + " before the timeout", peer);
    } catch (const Error& e) {
      throw PeerError("rank " + std::to_string(peer) + " left during the shared-memory setup: " + e.what(), peer);
    }
    if (got != sizeof r || r.magic != kReadyMagic)
      throw PeerError("rank " + std::to_string(peer) + " sent a malformed shared-memory setup record", peer);
    PairSetup s;
    s.peer = peer;
    s.in = inbound[static_cast<size_t>(peer)];
    s.out = outbound[static_cast<size_t>(peer)];
    s.sock = std::move(socks[static_cast<size_t>(peer)]);
    s.peer_pid = pids[static_cast<size_t>(peer)];
    s.peer_reads_us = r.can_read_you != 0;
    s.cma_min_bytes = g.cma_min_bytes;
    // Reading and writing another process's memory need the same permission.
    s.help_peer = g.cma_help && we_read[static_cast<size_t>(peer)];
    s.light_fence = dev->waiter_membarrier_ && peer_membarrier[static_cast<size_t>(peer)];
    dev->add_pair(std::move(s));
  }
  KOLO_LOG(debug, "shm: connected to " << peers.size() << " peer(s); segment " << seg_name << " ("
                                       << total << " bytes, " << g.nslots << " slots of " << g.slot_bytes << " bytes per ring)");
}

}  // namespace kolo::shm
