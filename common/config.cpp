#include "common/config.hpp"

#include <cstdlib>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "common/byte_size.hpp"
#include "kolo/error.hpp"

namespace kolo::config {

// The table. Keep it sorted by area; docs/ENVIRONMENT.md mirrors it.
const std::vector<Tunable>& tunables() {
  static const std::vector<Tunable> table = {
      // Errors and debugging
      {"KOLO_TIMEOUT", "300", "Default timeout of every collective and of connection setup, in seconds (fractions allowed). A collective's counts from the first time it has to wait for a peer (its first clock read), a send's or receive's from the first check while it is in flight."},
      {"KOLO_BLAME_GRACE", "1000", "Grace period of the blame chain, in milliseconds (at most half the timeout): a rank whose wait times out publishes in the group's store whom it waited for, then follows the other timed-out ranks' entries to the first rank that publishes nothing within this time, and names that one. 0: off (name the rank waited for at once)."},
      {"KOLO_DEBUG", "WARN", "Log level: ERROR, WARN, INFO (one line per collective: algorithm and transport), DEBUG, TRACE."},
      {"KOLO_DEBUG_SUBSYS", "ALL", "Subsystems whose INFO/DEBUG/TRACE lines show, as NCCL_DEBUG_SUBSYS: a comma list of INIT, COLL, P2P, NET, SHM, IB, STORE, ENV, ALL; a leading ^ excludes them instead (^NET,SHM). Errors and warnings always show."},
      {"KOLO_FR_SIZE", "256", "Flight recorder: how many of the last operations each group keeps (op, seq, size, algorithm, transport, state, times, the peer a stuck one waits for); dumped to KOLO_FR_DIR on a failure or SIGUSR1. 0: off."},
      {"KOLO_FR_DIR", "/tmp/kolo-flight-recorder", "Where flight-recorder dumps go: <job>.<group>.rank<r>.json and .txt, <job> being the launch's id (KOLO_JOB_ID, else TORCHELASTIC_RUN_ID, Slurm's or Open MPI's job id, else master-<MASTER_ADDR>-<MASTER_PORT>, else group-<a hash of the group's secret and store prefix>), so that several jobs can share the folder; kolo-trace reads one job's dumps (--job ID picks one)."},
      {"KOLO_TRACE", "", "Write a Chrome trace (chrome://tracing, Perfetto) of every operation of every group to this file when the group ends; %r is the rank, else .rank<r>.json is appended."},
      {"KOLO_DEBUG_FILE", "", "Write log lines to this file instead of stderr, per process: %h host name, %p pid, %r rank (pid<N> before the rank is known), %% a percent sign."},
      // Device memory
      {"KOLO_DEVICE_STANDIN", "0", "Tests without a GPU: N > 0 makes kolo stage \"device\" buffers through a host stand-in for a GPU with N devices (kernels/standin: host memory from its alloc_device, streams run by threads) instead of CUDA."},
      {"KOLO_DEVICE_CHUNK_BYTES", "4M", "Device memory: an all-reduce, reduce or broadcast larger than this runs as one host operation per chunk of this size, so that copying chunks out of and back into device memory overlaps moving the others."},
      {"KOLO_DEVICE_TWO_STEP_BYTES", "256K", "Device memory: above two ranks, an all-reduce or reduce whose chunks are at least this large moves them in two steps (an all-to-all of slices, reduced on the GPU, then an allgather or gather of the reduced slices: a ring's bytes); smaller ones gather whole chunks where the result is wanted and the GPU reduces them there (one step)."},
      {"KOLO_DEVICE_STAGE_BYTES", "256M", "Device memory: pinned host staging kept per group for reuse, beside a 4 MiB slab for small operations (past it, operations pin and unpin their own: milliseconds each)."},
      {"KOLO_CUDA_IPC", "0", "Device memory, ranks all on one host: 1 moves collectives of at least KOLO_CUDA_IPC_MIN_BYTES directly between the processes' device memory (transports/cuda_ipc: peers' buffers mapped with CUDA IPC handles, ordered with IPC events) instead of staging them through pinned host memory. Off until proven on a GPU; ignored without CUDA."},
      {"KOLO_CUDA_IPC_MIN_BYTES", "1M", "With KOLO_CUDA_IPC=1: the smallest operation (bytes per rank) that goes over CUDA IPC; smaller ones take the staging path, whose latency is lower when ranks share one GPU (its processes take turns on it)."},
      {"KOLO_CUDA_IPC_ORDERING", "events", "CUDA IPC: how a rank's stream waits for a peer's step of a call, after the host has seen the peer issue it: events (interprocess CUDA events), flags (64-bit words in the shared host segment that the streams write and wait on: cuStreamWriteValue64 / cuStreamWaitValue64), or host (no GPU-side wait: each step is published once the stream has finished the work before it; for diagnosis). Every rank must set the same value."},
      {"KOLO_CUDA_IPC_ALGO", "auto", "CUDA IPC all-reduce: auto runs the algorithm the cost model (KOLO_CUDA_IPC_MODEL, docs/COST_MODEL.md \"CUDA IPC (one node)\") predicts fastest for the size, the ranks and whether they share a GPU; one-shot, two-shot, two-shot-push, leader-push or ring forces that one. Every rank must set the same value (a mismatch fails the call, naming both ranks' algorithms)."},
      {"KOLO_CUDA_IPC_MODEL", "142.8,10,2.4,3926,450", "CUDA IPC cost model: phase_shared_us,phase_separate_us,launch_us,hbm_GBps,link_GBps: one handshake phase where ranks share a GPU (without MPS a phase waits for the GPU's time slice to pass) and where each has its own, one kernel or copy, a GPU's memory rate (read + written) and its link's rate each way. Default: the shared phase, launch and memory rate fitted on an H200 (docs/gpu-runs run 7); the separate phase and the link (H200 NVLink's spec) not measured yet. Every rank must set the same value."},
      {"KOLO_CUDA_IPC_MODEL_ORDERING", "events=0,flags=0,host=0", "CUDA IPC cost model: microseconds each phase costs over the events ordering's under each KOLO_CUDA_IPC_ORDERING (flags and host not measured yet: 0)."},
      // Selection
      {"KOLO_ALGO", "", "Force an algorithm: a name (ring, tree, direct, rd, ...) for every collective that has it, or per collective: allreduce=ring,broadcast=tree."},
      {"KOLO_TRANSPORT", "", "Force a transport for every peer (tcp, shm, ibverbs). Empty: automatic (shm for ranks on this host; for the others ibverbs when both ends have an active RDMA port, else tcp)."},
      {"KOLO_SMALL_BYTES", "32768", "Threshold rule (KOLO_SELECT): messages up to this many bytes (per rank) use latency-optimal algorithms (recursive doubling / direct); above it, groups spanning hosts use the hierarchical ones (hier). Setting it selects the threshold rule under KOLO_SELECT=auto."},
      {"KOLO_TREE_MAX_BYTES", "262144", "Threshold rule (KOLO_SELECT): all-reduce uses the double binary tree up to this many bytes, the ring above. Setting it selects the threshold rule under KOLO_SELECT=auto."},
      {"KOLO_SELECT", "auto", "How the automatic choice is made: model (the threshold rule's choice, unless the alpha-beta cost model of docs/COST_MODEL.md predicts another algorithm at least 3 % faster), threshold (KOLO_SMALL_BYTES / KOLO_TREE_MAX_BYTES only), auto (model, unless KOLO_SMALL_BYTES or KOLO_TREE_MAX_BYTES is set)."},
      {"KOLO_MODEL_SHM", "21.88,3.802", "Cost model: the link between ranks of one host, as alpha_us,GBps (per-message latency in microseconds, bandwidth in GB/s). Default: fitted on the development machine by bench/model/fit.py."},
      {"KOLO_MODEL_NET", "39.96,0.02285", "Cost model: a host's network link to the other hosts, as alpha_us,GBps (one link per host, shared by its ranks). Default: fitted by bench/model/fit.py between netns hosts whose links tbf shapes to 200 Mbit/s; set it to your network's (e.g. 5,12.5 for 100 Gbit/s Ethernet)."},
      {"KOLO_MODEL_REDUCE_GBPS", "3.183", "Cost model: reduction rate in GB/s (bytes of one operand combined per second). Default: fitted by bench/model/fit.py."},
      {"KOLO_TWOSHOT_MIN_BYTES", "8M", "All-reduce on one host of 3 to 8 ranks that outnumber its CPUs (KOLO_HOST_CPUS): from this many bytes per rank the automatic choice is twoshot (a direct reduce-scatter, then a direct all-gather: two rounds of whole blocks, which shared memory copies once each) instead of the ring (2(P-1) rounds of chunks, each copied twice, every round waiting for a rank that may not be running). 0: never."},
      {"KOLO_HOST_CPUS", "0", "How many CPUs this host's ranks share, as the automatic choice sees it (KOLO_TWOSHOT_MIN_BYTES). 0: the CPUs online (sysconf), the same number on every rank of a host whatever each is bound to."},
      {"KOLO_CHUNK_BYTES", "524288", "Pipelining unit: large messages move in chunks of this many bytes so sending, receiving and reducing overlap."},
      // Bootstrap and TCP
      {"KOLO_SECRET", "", "Shared job secret, proved (HMAC-SHA256 challenge-response, never sent) on every connection. Empty: rank 0 makes one and shares it through the store, and a warning says the job is unauthenticated."},
      {"KOLO_STORE_AUTH", "auto", "Authentication on init_from_env's TCPStore (kolo's own challenge-response over KOLO_SECRET, before any c10d request; neither side sends the secret): on, off, or auto (on when KOLO_SECRET is set and kolo hosts the store, i.e. not under torchrun's agent store, whose c10d protocol cannot authenticate). kolo-store follows it too (auto: on when it has KOLO_SECRET). Off lets torch's TCPStore clients use a store that kolo hosts."},
      {"KOLO_STORE_ADDR", "", "host:port of a rendezvous store the launcher hosts (kolorun sets it for a job on this host): init_from_env joins it as a client on every rank, rank 0 included, so the store outlives any rank (ProcessGroup::shrink needs that) and MASTER_PORT is left to the program. Empty: rank 0 hosts the store at MASTER_ADDR:MASTER_PORT (or torchrun's agent does)."},
      {"KOLO_STORE_PROTOCOL", "auto", "Dialect of c10d's TCPStore protocol that init_from_env's store client speaks: auto (ask the server: one VALIDATE+PING probe), torch1 (torch <= 2.0, e.g. Debian's 1.13), torch2 (torch >= 2.1). kolo's own server understands both."},
      {"KOLO_HOST_ID", "", "Which host this rank is on, as ranks compare it: equal ids share memory (shm transport) and a host in the hierarchical algorithms. Empty: detected (host name, kernel boot id, network namespace and /dev/shm mount). Set it to split one machine into pretend hosts, or to join containers that share memory."},
      {"KOLO_SOCKET_IFADDR", "", "Address this rank listens on for its TCP peers and advertises to them; takes precedence over KOLO_SOCKET_IFNAME. Empty: chosen by KOLO_SOCKET_IFNAME, else 127.0.0.1 when every rank is on this host, else the first up non-loopback IPv4 address."},
      {"KOLO_SOCKET_IFNAME", "", "Interface whose IPv4 address the TCP transport listens on and advertises, as NCCL_SOCKET_IFNAME: comma list of name prefixes (eth,ib), =eth0 for exact names, ^docker,lo for all but those. Empty: see KOLO_SOCKET_IFADDR."},
      {"KOLO_CONNECT", "eager", "How a group's TCP connections open: eager (a full mesh while the group forms: every rank sees any peer's death at once, and the first collective pays no connect) or lazy (each connection on its first use, so a rank holds sockets only to the peers its algorithms talk to: 2 for a ring, not size-1). Shared memory always connects eagerly."},
      {"KOLO_SHRINK_REUSE", "1", "1: ProcessGroup::shrink carries the survivors' connections to each other over into the new group where the transport can (tcp without TLS, shm), after resynchronising each one, and connects only the rest. 0: the new group connects anew (for comparison and diagnosis)."},
      {"KOLO_SPLIT_SHARE", "0", "Default of SplitOptions.share_connections for ProcessGroup::split, new_group and subgroup_of_members, and so for torch's new_group(backend=\"kolo\") under kolo_torch: 1: a subgroup opens no connection of its own and runs on its parent's connections and engine thread (NCCL's splitShare; every rank must then issue the parent's and the subgroup's operations in the same order, and a failure of either fails both). 0: a subgroup connects anew."},
      {"KOLO_SOCKET_BUFFER_BYTES", "0", "SO_SNDBUF/SO_RCVBUF for peer sockets; 0 (the default) leaves the kernel's autotuning alone. A fixed size lets the peer fill a receive buffer whose small messages' memory overhead then overflows it: the kernel prunes and drops, and a retransmission timeout stalls the pair for 100-200 ms (thousands of 4 KiB sends in flight, docs/PERFORMANCE.md)."},
      {"KOLO_TLS", "0", "1: TLS 1.3 on every TCP connection between ranks (and the ibverbs side channel), after the secret-checking hello. Peers are trusted by certificates when KOLO_TLS_CERT, KOLO_TLS_KEY and KOLO_TLS_CA are set, else by a pre-shared key derived from KOLO_SECRET (which must then be set). Records are sealed by the kernel (kTLS) where it offers it, else by OpenSSL. Every rank must set the same value."},
      {"KOLO_TLS_CERT", "", "KOLO_TLS=1: this rank's certificate (PEM, chain allowed), as Gloo's TCP_TLS cert."},
      {"KOLO_TLS_KEY", "", "KOLO_TLS=1: the private key of KOLO_TLS_CERT (PEM), as Gloo's pkey."},
      {"KOLO_TLS_CA", "", "KOLO_TLS=1: CA certificate(s) (PEM) that every peer's certificate must chain to, as Gloo's ca. Host names are not checked."},
      {"KOLO_SPIN_US", "200", "How long a waiting rank polls (yielding the core between polls) before it sleeps in poll(2)."},
      {"KOLO_YIELD_WHEN_IDLE", "auto", "1: a waiting rank yields its core after every poll that finds nothing (no pure spin), which lets a peer that is not running at all get the core (Open MPI's mpi_yield_when_idle). 0: it first polls 64 times without a system call. auto: 1 when this host runs more of the group's ranks than this process may use CPUs (sched_getaffinity). kolorun sets 0 in the ranks it binds one per CPU (--bind-to), whose single CPU would otherwise read as oversubscription."},
      {"KOLO_INLINE", "1", "1: while callers wait right after issuing, a collective runs on the caller's thread inside wait() instead of the group's engine thread (no thread hand-off). 0: always on the engine thread."},
      {"KOLO_DIRECT", "1", "1: a collective of at most KOLO_DIRECT_BYTES per rank, issued while its group has nothing queued or running, on ranks that all reach each other through shared memory, runs at once on the issuing thread (its messages go straight into the rings, without the engine's queue and requests); it hands over to the engine when a message it needs has not arrived within KOLO_DIRECT_SPIN_US. 0: every collective goes through the engine's queue. Either way the same messages move: ranks may differ."},
      {"KOLO_DIRECT_BYTES", "8192", "Largest collective (bytes per rank) that the direct path (KOLO_DIRECT) runs; each of its messages must also fit one shared-memory slot."},
      {"KOLO_DIRECT_SPIN_US", "20", "How long a directly run collective (KOLO_DIRECT) polls for the messages it needs before it hands over to the engine, which then runs it like any other (the issuing thread returns). It polls without a system call for the first quarter of this window and yields between polls after that, so that a peer the scheduler put on the same core gets it. Also how long a caller waiting for a send or receive polls the pair directly before the operation is posted the ordinary way."},
      {"KOLO_INLINE_WINDOW_US", "50", "How long a collective waits for its caller to run it inline before the engine thread takes it (and stops deferring until callers wait again)."},
      // Shared memory (ranks on one host)
      {"KOLO_SHM_SLOT_BYTES", "16384", "Size of one slot of a shared-memory ring, 64-byte header included; a message up to this size less 64 bytes takes one slot, larger ones are pipelined slot by slot."},
      {"KOLO_SHM_SLOTS", "32", "Slots per shared-memory ring. Each rank reserves KOLO_SHM_SLOTS x KOLO_SHM_SLOT_BYTES in /dev/shm per local peer."},
      {"KOLO_SHM_CMA_MIN_BYTES", "2097152", "Messages of at least this many bytes are copied once, straight from the sender's buffer into the receiver's (process_vm_readv, and process_vm_writev by a waiting sender: KOLO_SHM_CMA_HELP); smaller ones go through the ring. 0: never. The default is two 1 MiB pieces: a one-piece message, which only the receiver can copy, moved faster through the ring."},
      {"KOLO_ASYMMETRIC_FENCE", "1", "1: a thread about to sleep on the engine's run lock asks the kernel for a memory barrier on this process's CPUs (membarrier(2), private expedited), so that giving back the run lock takes no locked instruction (which, right after a collective's last send, would wait for the message to leave this core). 0: an exchange, as an ordinary lock's (Linux before 4.14, or membarrier blocked by seccomp, get that too)."},
      {"KOLO_SHM_ASYMMETRIC_FENCE", "1", "1: a rank about to sleep asks the kernel for a memory barrier on its peers' CPUs (membarrier(2), global expedited), so that publishing a message needs no fence; used between two ranks only when both can (Linux 4.16 and up, not blocked by seccomp). 0: a store-load fence after every message published or slot freed, which waits for the slot's cache lines to come back from the peer's core."},
      {"KOLO_SHM_CMA_HELP", "1", "1: while a rank waits for a peer to read its large message (KOLO_SHM_CMA_MIN_BYTES and up, in two pieces of 1 MiB or more), it writes pieces of it into the peer's buffer itself (process_vm_writev), so both cores copy. 0: the receiver copies alone."},
      // RDMA verbs (ibverbs transport)
      {"KOLO_IB_HCA", "", "RDMA device and port for the ibverbs transport, as name[:port] (mlx5_0:1, rxe0). Empty: the first ACTIVE port of any device."},
      {"KOLO_IB_GID_INDEX", "", "GID table index for the ibverbs transport. Empty: on RoCE a RoCE v2 GID holding an IPv4-mapped address (from sysfs gid_attrs/types), on InfiniBand none (LID routing)."},
      {"KOLO_IB_SLOT_BYTES", "131072", "Size of one slot of an RDMA receive ring, 64-byte header included; longer messages are written slot by slot."},
      {"KOLO_KERNELS", "auto", "CPU reduction kernels: auto (AVX-512 where the CPU has it, else portable), portable, avx512."},
      {"KOLO_JOB_ID", "", "Id of the launch (kolorun sets a random one for every rank); names shared-memory segments so that concurrent jobs never collide (empty: a hash of the group's store prefix), and flight-recorder dumps (empty: see KOLO_FR_DIR)."},
      {"KOLO_IB_SLOTS", "16", "Slots per RDMA ring. Each rank registers 2 x KOLO_IB_SLOTS x KOLO_IB_SLOT_BYTES per peer (a staging and a receive ring)."},
  };
  return table;
}

static const Tunable& find(const char* name) {
  for (const auto& t : tunables())
    if (std::string(t.name) == name) return t;
  throw std::logic_error(std::string("kolo: tunable ") + name + " is not in the table (common/config.cpp)");
}

bool is_set(const char* name) {
  find(name);
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}

std::string get_string(const char* name) {
  const Tunable& t = find(name);
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? std::string(v) : std::string(t.default_value);
}

int64_t get_int(const char* name) {
  std::string s = get_string(name);
  if (s.empty()) return 0;
  // A leading minus, then the shared K/M/G parser (byte_size.hpp) for the magnitude.
  const bool negative = s[0] == '-';
  const std::optional<uint64_t> magnitude = common::parse_byte_size(std::string_view(s).substr(negative ? 1 : 0));
  if (!magnitude) throw InvalidArgument(std::string(name) + "='" + s + "' is not an integer with an optional K, M or G");
  if (*magnitude > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    throw InvalidArgument(std::string(name) + "='" + s + "' is too large");
  const auto v = static_cast<int64_t>(*magnitude);
  return negative ? -v : v;
}

}  // namespace kolo::config
