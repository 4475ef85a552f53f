// kolo-perf-gloo: kolo-perf's table for Gloo's all-reduce algorithms over Gloo's TCP transport,
// to compare kolo with Gloo on the same machine and the same sizes. Started by kolorun:
//   kolorun -n 4 kolo-perf-gloo allreduce -b 8 -e 16M -f 4 --algo ring
// Ranks meet through Gloo's FileStore in a directory named after the launch (KOLO_JOB_ID), so
// it is single-host, like the loopback transport it measures.
// Exit status: 0 ok, 1 wrong results, 2 bad command line, 3 Gloo error.
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <system_error>

#include "gloo_backend.hpp"
#include "harness.hpp"
#include "peer_options.hpp"

namespace {

const kolo::peers::ProgramTraits kTraits{
    "kolo-perf-gloo", {"allreduce"}, {"ring", "ring_chunked", "halving_doubling"}, true, true,
};

int env_int(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0')
    throw kolo::peers::UsageError(std::string(name) + " is not set: start kolo-perf-gloo with kolorun (or torchrun)");
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (*end != '\0' || v < 0 || v > 1 << 20) throw kolo::peers::UsageError(std::string(name) + "='" + text + "' is not a rank count");
  return static_cast<int>(v);
}

// The FileStore directory: --store-dir, else one per launch under $TMPDIR.
std::filesystem::path store_directory(const kolo::peers::PeerOptions& o) {
  if (!o.store_dir.empty()) return o.store_dir;
  const char* job = std::getenv("KOLO_JOB_ID");
  if (job == nullptr || *job == '\0') job = std::getenv("TORCHELASTIC_RUN_ID");
  if (job == nullptr || *job == '\0')
    throw kolo::peers::UsageError("neither KOLO_JOB_ID nor TORCHELASTIC_RUN_ID is set: start with kolorun or pass --store-dir");
  const char* tmp = std::getenv("TMPDIR");
  return std::filesystem::path(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") / (std::string("kolo-perf-gloo-") + job);
}

int run(const kolo::peers::PeerOptions& o) {
  const int rank = env_int("RANK");
  const int size = env_int("WORLD_SIZE");
  if (size < 1 || rank >= size)
    throw kolo::peers::UsageError("RANK " + std::to_string(rank) + " is not below WORLD_SIZE " + std::to_string(size));
  const std::filesystem::path dir = store_directory(o);
  std::filesystem::create_directories(dir);
  // Rank 0 owns the directory: it goes away however this run ends (on success, right after the
  // mesh is up). Removing it under a failed run's waiting peers only makes them time out sooner.
  struct RemoveOnExit {
    std::filesystem::path dir;
    ~RemoveOnExit() {
      std::error_code ignored;
      if (!dir.empty()) std::filesystem::remove_all(dir, ignored);
    }
  } remove_on_exit{rank == 0 ? dir : std::filesystem::path()};

  // Loopback unless the launch names the address peers should use (kolo's own knob).
  const char* ifaddr = std::getenv("KOLO_SOCKET_IFADDR");
  gloo::transport::tcp::attr attr;
  attr.hostname = ifaddr != nullptr && *ifaddr != '\0' ? ifaddr : "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);

  gloo::rendezvous::FileStore file_store(dir.string());
  gloo::rendezvous::PrefixStore store("kolo-perf-gloo", file_store);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->setTimeout(o.timeout);  // bounds the connection and every wait of every algorithm
  context->connectFullMesh(store, device);

  kolo::peers::GlooBackend backend(context, o.algorithm, "tcp " + attr.hostname);
  // Everyone has read the store: rank 0 removes it now, so no launch leaves files behind.
  backend.barrier();
  if (rank == 0) std::filesystem::remove_all(dir);
  const int status = kolo::bench::run_benchmark(backend, o, kTraits.name, std::string("[") + kTraits.name + "]");
  // No rank closes its sockets before every rank is out of the last collective. Gloo's classic
  // algorithms (AllreduceRing, ...: the run's last call is the check's AllreduceRing sum) wait
  // through transport::Buffer, whose waitRecv throws the pair's error before it looks at a
  // message that has already arrived; so a rank that returned from that call and exited failed a
  // slower peer still on its way to its last wait with "Connection closed by peer" (any algorithm,
  // at 3 and 4 ranks: 0.5-5% of runs on 2 busy cores, 2026-11-29). gloo::barrier waits on unbound
  // buffers, which hand over a completed receive before any error, and no peer can leave it before
  // this rank has posted its part: after it, nobody has a wait left that an exit could spoil.
  backend.barrier();
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kolo::peers;
  PeerOptions o;
  if (const int done = parse_command_line(argc, argv, kTraits, o); done >= 0) return done;
  const char* rank = std::getenv("RANK");
  const std::string who = std::string("rank ") + (rank != nullptr ? rank : "?") + ": ";
  try {
    return run(o);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "kolo-perf-gloo: %s%s\n", who.c_str(), e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    // Gloo's errors (gloo::IoException, gloo::EnforceNotMet, ...) are std::exceptions.
    std::fprintf(stderr, "kolo-perf-gloo: %s%s\n", who.c_str(), e.what());
    return kExitError;
  }
}
