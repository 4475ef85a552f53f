// The cuda_ipc all-reduce's cost model (see ipc_cost_model.hpp; docs/COST_MODEL.md has the fit).
#include "transports/cuda_ipc/ipc_cost_model.hpp"

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <vector>
#include "common/config.hpp"
#include "kolo/error.hpp"
#include "transports/cuda_ipc/ring_schedule.hpp"

namespace kolo::cuda_ipc {

Placement Placement::one_gpu(int world) {
  Placement p;
  p.world = world;
  return p;
}

Placement Placement::own_gpus(int world) {
  Placement p;
  p.world = world;
  for (int r = 0; r < world; ++r) p.gpu_of[r] = r;
  return p;
}

int Placement::gpus() const {
  int n = 0;
  for (int r = 0; r < world; ++r) n = std::max(n, gpu_of[r] + 1);
  return n;
}

bool Placement::shared() const { return gpus() < world; }

namespace {

std::vector<double> numbers(const char* name, const std::string& text, size_t want) {
  std::vector<double> v;
  bool ok = true;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const double x = std::strtod(item.c_str(), &end);
    ok = ok && !item.empty() && *end == '\0' && x >= 0;
    v.push_back(x);
  }
  if (!ok || v.size() != want) {
    throw InvalidArgument(std::string(name) + "='" + text + "': expected " + std::to_string(want) +
                          " non-negative numbers separated by commas");
  }
  return v;
}

}  // namespace

IpcModelParams IpcModelParams::parse(const std::string& model, const std::string& ordering) {
  const std::vector<double> v = numbers("KOLO_CUDA_IPC_MODEL", model, 5);
  if (v[3] <= 0 || v[4] <= 0) {
    throw InvalidArgument("KOLO_CUDA_IPC_MODEL='" + model + "': the memory and link rates (4th, 5th) must be > 0 GB/s");
  }
  IpcModelParams m{v[0], v[1], v[2], v[3], v[4], {0, 0, 0}};
  // ordering: events=X,flags=Y,host=Z, each optional (0 when absent), in any order.
  std::stringstream ss(ordering);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t eq = item.find('=');
    int slot = -1;
    const std::string key = item.substr(0, eq);
    for (Ordering o : {Ordering::events, Ordering::flags, Ordering::host})
      if (key == ordering_name(o)) slot = static_cast<int>(o);
    char* end = nullptr;
    const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    const double x = std::strtod(value.c_str(), &end);
    if (slot < 0 || value.empty() || *end != '\0' || !(x >= 0)) {
      throw InvalidArgument("KOLO_CUDA_IPC_MODEL_ORDERING='" + ordering +
                            "': expected events=US,flags=US,host=US (microseconds per phase over events, >= 0)");
    }
    m.ordering_extra_us[slot] = x;
  }
  return m;
}

IpcModelParams IpcModelParams::from_config() {
  return parse(config::get_string("KOLO_CUDA_IPC_MODEL"), config::get_string("KOLO_CUDA_IPC_MODEL_ORDERING"));
}

IpcModelParams IpcModelParams::defaults() {
  std::string model, ordering;
  for (const config::Tunable& t : config::tunables()) {
    if (std::string(t.name) == "KOLO_CUDA_IPC_MODEL") model = t.default_value;
    if (std::string(t.name) == "KOLO_CUDA_IPC_MODEL_ORDERING") ordering = t.default_value;
  }
  return parse(model, ordering);
}

double IpcModelParams::phase_us(bool shared, Ordering o) const {
  return (shared ? phase_shared_us : phase_separate_us) + ordering_extra_us[static_cast<int>(o)];
}

double Traffic::total_hbm() const {
  double t = 0;
  for (double b : hbm) t += b;
  return t;
}

int Traffic::total_launches() const {
  int n = 0;
  for (int l : launches) n += l;
  return n;
}

Traffic traffic(Algo algo, size_t bytes, const Placement& where) {
  const int P = where.world;
  if (P < 1 || P > kMaxRanks) throw InvalidArgument("cuda_ipc cost model: " + std::to_string(P) + " ranks");
  Traffic t;
  // READY and DONE; two-shot's MID; the ring's 2 (P - 1) - 1 phases between its steps.
  t.phases = 2;
  if (bytes > 0 && algo == Algo::kTwoShot) t.phases = 3;
  if (bytes > 0 && algo == Algo::kRing) t.phases = 2 + std::max(0, 2 * (P - 1) - 1);
  // Rank a touches `n` bytes of rank o's buffer: HBM of o's GPU, and the link when a runs elsewhere.
  auto read = [&](int a, int o, size_t n) {
    const int ga = where.gpu_of[a], go = where.gpu_of[o];
    t.hbm[go] += static_cast<double>(n);
    if (ga != go) t.link_out[go] += static_cast<double>(n), t.link_in[ga] += static_cast<double>(n);
  };
  auto write = [&](int a, int o, size_t n) {
    const int ga = where.gpu_of[a], go = where.gpu_of[o];
    t.hbm[go] += static_cast<double>(n);
    if (ga != go) t.link_out[ga] += static_cast<double>(n), t.link_in[go] += static_cast<double>(n);
  };
  // launch_sum over a range of n bytes: a vector kernel for its whole 16-byte vectors, a
  // scalar one for the tail (the buffers are taken as 16-byte aligned, as cudaMalloc's are).
  auto sum_launches = [](size_t n) { return static_cast<int>(n >= 16) + static_cast<int>(n % 16 != 0); };
  // The two-shot slices of ipc_comm.cpp: ceil(n / P) rounded up to 16 bytes, the last one short.
  const size_t per = (bytes + P - 1) / P;
  const size_t slice = (per + 15) / 16 * 16;
  auto begin = [&](int p) { return std::min(bytes, static_cast<size_t>(p) * slice); };
  auto len = [&](int p) { return begin(p + 1) - begin(p); };
  if (bytes == 0) return t;
  switch (algo) {
    case Algo::kOneShot:  // every rank: all P inputs whole into its own output
      for (int a = 0; a < P; ++a) {
        for (int o = 0; o < P; ++o) read(a, o, bytes);
        write(a, a, bytes);
        t.launches[where.gpu_of[a]] += sum_launches(bytes);
      }
      break;
    case Algo::kTwoShot:  // slice a of all inputs into a's output; then the other slices copied
      for (int a = 0; a < P; ++a) {
        for (int o = 0; o < P; ++o) read(a, o, len(a));
        write(a, a, len(a));
        t.launches[where.gpu_of[a]] += len(a) > 0 ? sum_launches(len(a)) : 0;
        for (int p = 0; p < P; ++p) {
          if (p == a || len(p) == 0) continue;
          read(a, p, len(p));
          write(a, a, len(p));
          t.launches[where.gpu_of[a]] += 1;
        }
      }
      break;
    case Algo::kTwoShotPush:  // slice a of all inputs into slice a of every output
      for (int a = 0; a < P; ++a) {
        for (int o = 0; o < P; ++o) read(a, o, len(a)), write(a, o, len(a));
        t.launches[where.gpu_of[a]] += len(a) > 0 ? sum_launches(len(a)) : 0;
      }
      break;
    case Algo::kLeaderPush:  // rank 0: all inputs whole into every output
      for (int o = 0; o < P; ++o) read(0, o, bytes), write(0, o, bytes);
      t.launches[where.gpu_of[0]] += sum_launches(bytes);
      break;
    case Algo::kRing:  // ipc_ring.cpp, step by step from ring_schedule.hpp (chunks are two-shot's slices)
      if (P == 1) {  // one copy of the input
        read(0, 0, bytes), write(0, 0, bytes);
        t.launches[where.gpu_of[0]] += 1;
        break;
      }
      for (int a = 0; a < P; ++a) {
        const int l = (a + P - 1) % P;
        for (int g = 0; g < ring_steps(P); ++g) {
          const RingStep st = ring_step(a, P, g);
          const size_t n = len(st.chunk);
          if (st.sum) read(a, a, n);  // its own input's chunk
          read(a, l, n), write(a, a, n);
          t.launches[where.gpu_of[a]] += n == 0 ? 0 : st.sum ? sum_launches(n) : 1;
        }
      }
      break;
  }
  return t;
}

double predict_us(Algo algo, size_t bytes, const Placement& where, Ordering ordering, const IpcModelParams& m) {
  const Traffic t = traffic(algo, bytes, where);
  double busiest = 0;  // µs of the GPU that takes longest over its share
  for (int g = 0; g < where.gpus(); ++g) {
    const double moving = std::max({t.hbm[g] / (m.hbm_gbps * 1e3), t.link_in[g] / (m.link_gbps * 1e3),
                                    t.link_out[g] / (m.link_gbps * 1e3)});
    busiest = std::max(busiest, t.launches[g] * m.launch_us + moving);
  }
  return t.phases * m.phase_us(where.shared(), ordering) + busiest;
}

Algo choose_algo(size_t bytes, const Placement& where, Ordering ordering, const IpcModelParams& m) {
  Algo best = kAllAlgos[0];
  double best_us = predict_us(best, bytes, where, ordering, m);
  for (Algo a : kAllAlgos) {
    const double us = predict_us(a, bytes, where, ordering, m);
    if (us < best_us) best = a, best_us = us;
  }
  return best;
}

}  // namespace kolo::cuda_ipc
