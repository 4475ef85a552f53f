// Scenario "random SEED COUNT [MAX_BYTES [SAMPLE_EVERY [SUBGROUPS]]]": COUNT random collectives
// (0: until kolo throws or 120 s pass, for the kill/stop trials), each checked element by
// element against the reference. Every rank draws from the same seeded generator, so all issue
// the same calls: a random collective, algorithm, dtype, op and placement (a template from the
// correctness matrix, matrix_cases.cpp), a random root and a log-uniform size up to MAX_BYTES
// (default 1 MiB). With SUBGROUPS=1 (and 3+ ranks), now and then the world is cut into
// subgroups (new_group of a random list, or split with random colors) that run a few random
// collectives of their own and are shut down: their setup and teardown must leak nothing.
// Every SAMPLE_EVERY collectives (0: never) each rank prints one line
//   "sample <n> fds=<open descriptors> rss_kb=<resident KiB> shm_maps=<mapped /dev/shm files>
//    devshm=<entries in /dev/shm with KOLO_JOB_ID in their name (all entries without it)>"
// which the soak driver reads to see that nothing grows.
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "matrix_run.hpp"
#include "worker_context.hpp"

namespace kolo::coltest {
namespace {

using Rng = std::mt19937_64;

size_t uniform(Rng& rng, size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); }

bool rooted(Coll c) { return c == Coll::broadcast || c == Coll::reduce || c == Coll::gather || c == Coll::scatter; }
// Collectives whose biggest buffer holds count * world elements.
bool times_world(Coll c) {
  return c == Coll::allgather || c == Coll::gather || c == Coll::scatter || c == Coll::reduce_scatter ||
         c == Coll::alltoall || c == Coll::alltoallv;
}

// The matrix's templates per group size, built once per size.
const std::vector<MatrixCase>& templates(Coll c, int size) {
  static std::map<std::pair<Coll, int>, std::vector<MatrixCase>> cache;
  auto [it, fresh] = cache.try_emplace({c, size});
  if (fresh) it->second = matrix_cases(c, size);
  return it->second;
}

MatrixCase draw_case(Rng& rng, int size, size_t max_bytes) {
  const std::vector<Coll> colls = all_colls();
  for (;;) {
    const Coll c = colls[uniform(rng, colls.size())];
    const auto& pool = templates(c, size);
    if (pool.empty()) continue;  // sendrecv alone
    MatrixCase m = pool[uniform(rng, pool.size())];
    // Log-uniform bytes in [1, max_bytes] for the biggest buffer, now and then none at all.
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    size_t bytes = static_cast<size_t>(std::exp(u * std::log(static_cast<double>(max_bytes))));
    if (uniform(rng, 32) == 0) bytes = 0;
    m.count = bytes / dtype_size(m.dtype) / (times_world(c) ? static_cast<size_t>(size) : 1);
    if (rooted(c)) m.root = static_cast<int>(uniform(rng, static_cast<size_t>(size)));
    return m;
  }
}

// Entries of `path` whose name contains `part` (every entry when it is empty).
size_t count_dir(const char* path, const std::string& part = "") {
  size_t n = 0;
  if (DIR* d = opendir(path)) {
    while (const dirent* e = readdir(d))
      if (e->d_name[0] != '.' && std::string(e->d_name).find(part) != std::string::npos) ++n;
    closedir(d);
  }
  return n;
}

// The shared-memory transport puts KOLO_JOB_ID in its segment names: with it set, only this
// job's entries in /dev/shm are counted, not those of other jobs on the machine.
std::string job_id() {
  const char* v = std::getenv("KOLO_JOB_ID");
  return v != nullptr ? v : "";
}

void print_sample(const WorkerContext& ctx, size_t done) {
  long pages = 0;
  long resident = 0;
  std::ifstream("/proc/self/statm") >> pages >> resident;
  size_t shm_maps = 0;
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    if (line.find("/dev/shm/") != std::string::npos) ++shm_maps;
  // opendir holds one descriptor of its own while counting: not counted (its own "." entries
  // are skipped, but the fd it opened is listed), so subtract it.
  const size_t fds = count_dir("/proc/self/fd") - 1;
  ctx.say("sample " + std::to_string(done) + " fds=" + std::to_string(fds) +
          " rss_kb=" + std::to_string(resident * sysconf(_SC_PAGESIZE) / 1024) + " shm_maps=" + std::to_string(shm_maps) +
          " devshm=" + std::to_string(count_dir("/dev/shm", job_id())));
}

// Cuts the world into subgroups with the shared generator, runs `rounds` random cases in the
// subgroup this rank belongs to (drawn from a generator every member seeds alike), shuts it down.
// Returns how many collectives this rank ran in its subgroup.
size_t subgroup_episode(WorkerContext& ctx, ProcessGroup& world, Rng& rng, size_t max_bytes) {
  const int n = world.size();
  const size_t rounds = 1 + uniform(rng, 12);
  const uint64_t seed = rng();
  std::shared_ptr<ProcessGroup> sub;
  std::string how;
  int color = 0;  // split's groups draw different cases: their generators are seeded by color
  if (uniform(rng, 2) == 0) {
    // new_group: a random ordered list of 2..n ranks.
    std::vector<int> all(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) all[static_cast<size_t>(r)] = r;
    std::shuffle(all.begin(), all.end(), rng);
    all.resize(2 + uniform(rng, static_cast<size_t>(n - 1)));
    how = "new_group(";
    for (int r : all) how += std::to_string(r) + (r == all.back() ? ")" : ",");
    sub = world.new_group(all);
  } else {
    // split: every rank's color in {-1, 0, 1} and a random key, drawn alike on every rank.
    std::vector<int> colors(static_cast<size_t>(n));
    std::vector<int> keys(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      colors[static_cast<size_t>(r)] = static_cast<int>(uniform(rng, 3)) - 1;
      keys[static_cast<size_t>(r)] = static_cast<int>(uniform(rng, 100));
    }
    how = "split(colors";
    for (int c : colors) how += " " + std::to_string(c);
    how += ")";
    const int me = world.rank();
    color = colors[static_cast<size_t>(me)];
    sub = world.split(color, keys[static_cast<size_t>(me)]);
  }
  if (!sub) return 0;
  Rng sub_rng(seed + static_cast<uint64_t>(color + 1));
  for (size_t i = 0; i < rounds; ++i) {
    const MatrixCase c = draw_case(sub_rng, sub->size(), max_bytes);
    ctx.log.begin_case(how + " size " + std::to_string(sub->size()) + ": " + c.describe());
    run_matrix_case(*sub, c, static_cast<uint32_t>(sub_rng()), ctx.log);
  }
  sub->shutdown();
  return rounds;
}

}  // namespace

void scenario_random(WorkerContext& ctx) {
  if (ctx.args.size() < 2) throw std::invalid_argument("random needs SEED COUNT [MAX_BYTES [SAMPLE_EVERY [SUBGROUPS]]]");
  Rng rng(std::stoull(ctx.args[0]));
  const size_t count = std::stoull(ctx.args[1]);
  const size_t max_bytes = ctx.args.size() > 2 ? std::stoull(ctx.args[2]) : size_t{1} << 20;
  const size_t sample_every = ctx.args.size() > 3 ? std::stoull(ctx.args[3]) : 0;
  const bool subgroups = ctx.args.size() > 4 && ctx.args[4] == "1";
  ProcessGroup& world = ctx.join();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  size_t episodes = 0;
  size_t sub_collectives = 0;
  for (size_t done = 0; count == 0 ? std::chrono::steady_clock::now() < until : done < count; ++done) {
    if (sample_every != 0 && done % sample_every == 0) print_sample(ctx, done);
    if (subgroups && world.size() >= 3 && uniform(rng, 40) == 0) {
      ++episodes;
      sub_collectives += subgroup_episode(ctx, world, rng, max_bytes);  // extra: the world case still runs
    }
    const MatrixCase c = draw_case(rng, world.size(), max_bytes);
    ctx.log.begin_case("#" + std::to_string(done) + " " + c.describe());
    run_matrix_case(world, c, static_cast<uint32_t>(done + 1), ctx.log);  // the same salt on every rank
    if (done == 0) ctx.say("loop started");
  }
  if (sample_every != 0) print_sample(ctx, count);
  ctx.say("random: " + std::to_string(count) + " world collectives, " + std::to_string(episodes) +
          " subgroup episodes, " + std::to_string(sub_collectives) + " collectives in this rank's subgroups");
  ctx.log.end_case();
}

}  // namespace kolo::coltest
