#include "checkpoint.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <type_traits>

#include "kolo/error.hpp"

namespace kolo::train {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'K', 'O', 'L', 'O', 'C', 'K', 'P', 'T'};
constexpr uint32_t kVersion = 1;

std::string file_name(uint64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "step-%08llu.ckpt", static_cast<unsigned long long>(step));
  return name;
}

// The step encoded in a checkpoint's file name, or nullopt for other files.
std::optional<uint64_t> step_of(const fs::path& path) {
  const std::string name = path.filename().string();
  unsigned long long step = 0;
  int consumed = 0;
  if (std::sscanf(name.c_str(), "step-%llu.ckpt%n", &step, &consumed) == 1 &&
      static_cast<size_t>(consumed) == name.size())
    return step;
  return std::nullopt;
}

class Writer {
 public:
  explicit Writer(std::ostream& out) : out_(out) {}
  template <class T>
  void value(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.write(reinterpret_cast<const char*>(&v), sizeof v);
  }
  template <class T>
  void vector(const std::vector<T>& v) {
    value<uint64_t>(v.size());
    out_.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
  }

 private:
  std::ostream& out_;
};

class Reader {
 public:
  Reader(std::istream& in, std::string path) : in_(in), path_(std::move(path)) {}
  template <class T>
  T value() {
    T v{};
    in_.read(reinterpret_cast<char*>(&v), sizeof v);
    check();
    return v;
  }
  template <class T>
  std::vector<T> vector(uint64_t limit) {
    const uint64_t n = value<uint64_t>();
    if (n > limit) throw Error("checkpoint " + path_ + " is corrupt (a vector of " + std::to_string(n) + " elements)");
    std::vector<T> v(n);
    in_.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(T)));
    check();
    return v;
  }

 private:
  void check() {
    if (!in_) throw Error("checkpoint " + path_ + " is truncated");
  }
  std::istream& in_;
  std::string path_;
};

void write_shape(Writer& w, const CheckpointShape& s) {
  for (int v : {s.vocab, s.seq, s.layers, s.heads, s.dim}) w.value<int32_t>(v);
  w.value(s.num_params);
  w.value(s.corpus_fingerprint);
}

CheckpointShape read_shape(Reader& r) {
  CheckpointShape s;
  for (int* v : {&s.vocab, &s.seq, &s.layers, &s.heads, &s.dim}) *v = r.value<int32_t>();
  s.num_params = r.value<uint64_t>();
  s.corpus_fingerprint = r.value<uint64_t>();
  return s;
}

void check_shape(const std::string& path, const CheckpointShape& got, const CheckpointShape& want) {
  auto field = [&](const char* name, uint64_t a, uint64_t b) {
    if (a != b)
      throw InvalidArgument("checkpoint " + path + " was written with " + name + " " + std::to_string(a) +
                            ", this run has " + std::to_string(b) + ": resume with the same model and data");
  };
  field("--layers", uint64_t(got.layers), uint64_t(want.layers));
  field("--heads", uint64_t(got.heads), uint64_t(want.heads));
  field("--dim", uint64_t(got.dim), uint64_t(want.dim));
  field("--seq", uint64_t(got.seq), uint64_t(want.seq));
  field("vocab", uint64_t(got.vocab), uint64_t(want.vocab));
  field("parameter count", got.num_params, want.num_params);
  if (got.corpus_fingerprint != want.corpus_fingerprint)
    throw InvalidArgument("checkpoint " + path + " was trained on different --data (corpus fingerprint differs)");
}

void remove_old_checkpoints(const fs::path& dir) {
  std::vector<std::pair<uint64_t, fs::path>> found;
  for (const auto& entry : fs::directory_iterator(dir))
    if (auto step = step_of(entry.path())) found.emplace_back(*step, entry.path());
  std::sort(found.begin(), found.end());
  for (size_t i = 0; i + kKeptCheckpoints < found.size(); ++i) {
    std::error_code ignored;
    fs::remove(found[i].second, ignored);
  }
}

void write_state(std::ostream& out, const TrainState& state) {
  Writer w(out);
  out.write(kMagic, sizeof kMagic);
  w.value(kVersion);
  write_shape(w, state.shape);
  w.value(state.step);
  w.value(state.global_batch);
  w.value(state.seed);
  w.value(state.sampler.epoch);
  w.value(state.sampler.next);
  w.value(state.rng);
  w.value(state.adam_steps);
  w.vector(state.params);
  w.vector(state.adam_m);
  w.vector(state.adam_v);
  w.vector(state.train_losses);
  w.vector(state.validation_losses);
}

// `path` names the source in messages (a file, or what sent the bytes).
TrainState read_state(std::istream& in, const std::string& path, const CheckpointShape& expected) {
  char magic[sizeof kMagic] = {};
  in.read(magic, sizeof magic);
  if (!in || std::memcmp(magic, kMagic, sizeof kMagic) != 0) throw Error(path + " is not a kolo-train checkpoint");
  Reader r(in, path);
  const auto version = r.value<uint32_t>();
  if (version != kVersion)
    throw Error("checkpoint " + path + " has format version " + std::to_string(version) + ", expected " +
                std::to_string(kVersion));
  TrainState state;
  state.shape = read_shape(r);
  check_shape(path, state.shape, expected);
  state.step = r.value<uint64_t>();
  state.global_batch = r.value<uint64_t>();
  state.seed = r.value<uint64_t>();
  state.sampler.epoch = r.value<uint64_t>();
  state.sampler.next = r.value<uint64_t>();
  state.rng = r.value<Rng::State>();
  state.adam_steps = r.value<uint64_t>();
  const uint64_t n = expected.num_params;
  state.params = r.vector<float>(n);
  state.adam_m = r.vector<float>(n);
  state.adam_v = r.vector<float>(n);
  if (state.params.size() != n || state.adam_m.size() != n || state.adam_v.size() != n)
    throw Error("checkpoint " + path + " is corrupt (tensor sizes differ from the parameter count)");
  state.train_losses = r.vector<LossPoint>(state.step);
  state.validation_losses = r.vector<LossPoint>(state.step + 1);
  return state;
}

}  // namespace

std::string encode_train_state(const TrainState& state) {
  std::ostringstream out(std::ios::binary);
  write_state(out, state);
  return std::move(out).str();
}

TrainState decode_train_state(const std::string& bytes, const std::string& from, const CheckpointShape& expected) {
  std::istringstream in(bytes, std::ios::binary);
  return read_state(in, from, expected);
}

std::string save_checkpoint(const std::string& dir, const TrainState& state) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error("cannot create the checkpoint directory " + dir + ": " + ec.message());
  const fs::path final_path = fs::path(dir) / file_name(state.step);
  const fs::path temp_path = fs::path(dir) / (file_name(state.step) + ".tmp");
  {
    std::ofstream out(temp_path, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("cannot write the checkpoint " + temp_path.string());
    write_state(out, state);
    out.flush();
    if (!out) throw Error("writing the checkpoint " + temp_path.string() + " failed (disk full?)");
  }
  fs::rename(temp_path, final_path, ec);
  if (ec) throw Error("cannot rename " + temp_path.string() + " to " + final_path.string() + ": " + ec.message());
  remove_old_checkpoints(dir);
  return final_path.string();
}

std::string checkpoint_path(const std::string& dir, uint64_t step) { return (fs::path(dir) / file_name(step)).string(); }

std::optional<std::string> latest_checkpoint(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return std::nullopt;
  std::optional<std::pair<uint64_t, std::string>> best;
  for (const auto& entry : fs::directory_iterator(dir))
    if (auto step = step_of(entry.path()))
      if (!best || *step > best->first) best = std::make_pair(*step, entry.path().string());
  if (!best) return std::nullopt;
  return best->second;
}

TrainState load_checkpoint(const std::string& path, const CheckpointShape& expected) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open the checkpoint " + path);
  return read_state(in, path, expected);
}

}  // namespace kolo::train
