// read_launch_env(): works out rank, world size and the rendezvous address from whichever
// launcher started this process.
//
// Precedence: torchrun (RANK / WORLD_SIZE set), then Open MPI (OMPI_COMM_WORLD_RANK /
// OMPI_COMM_WORLD_SIZE set), then Slurm (SLURM_PROCID set), else a single-process default.
// Empty variables count as unset.
//
//   torchrun:  RANK, WORLD_SIZE (both required), LOCAL_RANK (default 0), LOCAL_WORLD_SIZE
//              (default 1), MASTER_ADDR (default 127.0.0.1), MASTER_PORT (default 29500).
//              TORCHELASTIC_USE_AGENT_STORE=True (torchrun's static rendezvous): the agent hosts
//              the c10d store on MASTER_PORT, so rank 0 must not; keys then live under
//              "kolo/attempt_<TORCHELASTIC_RESTART_COUNT>" (a restarted job starts clean, as
//              torch's own workers do with "/worker/attempt_<n>").
//   Open MPI:  OMPI_COMM_WORLD_RANK/_SIZE (required), OMPI_COMM_WORLD_LOCAL_RANK/_LOCAL_SIZE
//              (defaults 0/1), MASTER_ADDR (default 127.0.0.1: Open MPI does not say where
//              rank 0 runs, so multi-node jobs must set MASTER_ADDR).
//   Slurm:     SLURM_PROCID, SLURM_NTASKS (required), SLURM_LOCALID (default 0), local world
//              size from SLURM_NTASKS_PER_NODE, else the first number of SLURM_TASKS_PER_NODE
//              ("4(x2),3" -> 4), else 1; MASTER_ADDR, else the first host of
//              SLURM_STEP_NODELIST / SLURM_NODELIST ("node[01-03,7]" -> "node01", "a,b" -> "a").
//
// MASTER_PORT, when unset under Open MPI or Slurm, is derived from the job id so that all ranks
// of a job agree on it and concurrent jobs on one node rarely collide:
//   20000 + (job id) % 20000, the job id being SLURM_JOB_ID for Slurm (its number when numeric)
//   or OMPI_MCA_orte_ess_jobid / OMPI_MCA_ess_base_jobid / PMIX_NAMESPACE for Open MPI; a
//   non-numeric id is hashed with 64-bit FNV-1a first. With no job id the port is 29500.
// Non-numeric values, negative or out-of-range ranks and sizes, and ports outside 1..65535 throw
// InvalidArgument naming the variable.
#include <charconv>
#include <cstdlib>
#include <optional>
#include <string>

#include "common/hash.hpp"
#include "kolo/error.hpp"
#include "kolo/process_group.hpp"

namespace kolo {
namespace {

constexpr uint16_t kDefaultPort = 29500;
constexpr uint16_t kDerivedPortBase = 20000;
constexpr uint16_t kDerivedPortRange = 20000;

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

int64_t parse_integer(const char* name, const std::string& text) {
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    throw InvalidArgument(std::string("launch environment: ") + name + "='" + text + "' is not an integer");
  }
  return value;
}

// An integer variable within [min, max]; `fallback` when unset, or an error when there is none.
int env_int(const char* name, int64_t min, int64_t max, std::optional<int> fallback) {
  auto text = env(name);
  if (!text) {
    if (fallback) return *fallback;
    throw InvalidArgument(std::string("launch environment: ") + name + " is not set");
  }
  int64_t value = parse_integer(name, *text);
  if (value < min || value > max) {
    throw InvalidArgument(std::string("launch environment: ") + name + "=" + *text + " is outside [" +
                          std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  return static_cast<int>(value);
}

constexpr int64_t kMaxProcesses = 1 << 24;

void require_below(const char* what, int value, const char* bound_name, int bound) {
  if (value >= bound) {
    throw InvalidArgument(std::string("launch environment: ") + what + "=" + std::to_string(value) +
                          " must be less than " + bound_name + "=" + std::to_string(bound));
  }
}

uint16_t port_from_env(std::optional<uint16_t> fallback) {
  if (env("MASTER_PORT")) return static_cast<uint16_t>(env_int("MASTER_PORT", 1, 65535, std::nullopt));
  return fallback.value_or(kDefaultPort);
}

uint64_t fnv1a(const std::string& s) { return common::fnv1a(s); }

std::optional<uint16_t> port_from_job_id(const std::optional<std::string>& job_id) {
  if (!job_id) return std::nullopt;
  uint64_t number = 0;
  auto [ptr, ec] = std::from_chars(job_id->data(), job_id->data() + job_id->size(), number);
  if (ec != std::errc() || ptr != job_id->data() + job_id->size()) number = fnv1a(*job_id);
  return static_cast<uint16_t>(kDerivedPortBase + number % kDerivedPortRange);
}

// First host of a Slurm node list: "node[01-03,7],gpu5" -> "node01", "a,b" -> "a".
std::string first_slurm_host(const std::string& list) {
  std::string host;
  size_t i = 0;
  // The first entry ends at a comma outside brackets.
  while (i < list.size() && list[i] != ',') {
    if (list[i] == '[') {
      size_t close = list.find(']', i);
      if (close == std::string::npos) {
        throw InvalidArgument("launch environment: Slurm node list '" + list + "' has an unclosed '['");
      }
      // The first value of the range set: up to the first '-' or ','; keeps zero padding.
      std::string inner = list.substr(i + 1, close - i - 1);
      host += inner.substr(0, inner.find_first_of("-,"));
      i = close + 1;
      continue;
    }
    host += list[i++];
  }
  if (host.empty()) throw InvalidArgument("launch environment: Slurm node list '" + list + "' names no host");
  return host;
}

// "4(x2),3" -> 4 (the task count of this job's first node).
std::optional<int> first_tasks_per_node(const char* name) {
  auto text = env(name);
  if (!text) return std::nullopt;
  std::string first = text->substr(0, text->find_first_of("(,"));
  int64_t value = parse_integer(name, first);
  if (value < 1 || value > kMaxProcesses) {
    throw InvalidArgument(std::string("launch environment: ") + name + "=" + *text + " is not a positive task count");
  }
  return static_cast<int>(value);
}

void validate(LaunchEnv& e, const char* rank_var, const char* size_var, const char* local_rank_var,
              const char* local_size_var) {
  require_below(rank_var, e.rank, size_var, e.world_size);
  require_below(local_rank_var, e.local_rank, local_size_var, e.local_world_size);
}

LaunchEnv from_torchrun() {
  LaunchEnv e;
  e.source = "torchrun";
  e.rank = env_int("RANK", 0, kMaxProcesses, std::nullopt);
  e.world_size = env_int("WORLD_SIZE", 1, kMaxProcesses, std::nullopt);
  e.local_rank = env_int("LOCAL_RANK", 0, kMaxProcesses, 0);
  e.local_world_size = env_int("LOCAL_WORLD_SIZE", 1, kMaxProcesses, 1);
  validate(e, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE");
  e.master_addr = env("MASTER_ADDR").value_or("127.0.0.1");
  e.master_port = port_from_env(std::nullopt);
  if (auto agent = env("TORCHELASTIC_USE_AGENT_STORE")) {
    // Python's str(True): "True"; accept the other usual spellings of yes.
    e.agent_store = *agent == "True" || *agent == "true" || *agent == "1";
  }
  if (e.agent_store) {
    e.store_prefix = "kolo/attempt_" + std::to_string(env_int("TORCHELASTIC_RESTART_COUNT", 0, 1 << 30, 0));
  }
  return e;
}

LaunchEnv from_openmpi() {
  LaunchEnv e;
  e.source = "openmpi";
  e.rank = env_int("OMPI_COMM_WORLD_RANK", 0, kMaxProcesses, std::nullopt);
  e.world_size = env_int("OMPI_COMM_WORLD_SIZE", 1, kMaxProcesses, std::nullopt);
  e.local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0, kMaxProcesses, 0);
  e.local_world_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1, kMaxProcesses, 1);
  validate(e, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
           "OMPI_COMM_WORLD_LOCAL_SIZE");
  e.master_addr = env("MASTER_ADDR").value_or("127.0.0.1");
  auto job_id = env("OMPI_MCA_orte_ess_jobid");
  if (!job_id) job_id = env("OMPI_MCA_ess_base_jobid");
  if (!job_id) job_id = env("PMIX_NAMESPACE");
  e.master_port = port_from_env(port_from_job_id(job_id));
  return e;
}

LaunchEnv from_slurm() {
  LaunchEnv e;
  e.source = "slurm";
  e.rank = env_int("SLURM_PROCID", 0, kMaxProcesses, std::nullopt);
  e.world_size = env_int("SLURM_NTASKS", 1, kMaxProcesses, std::nullopt);
  e.local_rank = env_int("SLURM_LOCALID", 0, kMaxProcesses, 0);
  const char* local_size_var = "SLURM_NTASKS_PER_NODE";
  if (env("SLURM_NTASKS_PER_NODE")) {
    e.local_world_size = env_int("SLURM_NTASKS_PER_NODE", 1, kMaxProcesses, std::nullopt);
  } else if (auto tasks = first_tasks_per_node("SLURM_TASKS_PER_NODE")) {
    e.local_world_size = *tasks;
    local_size_var = "SLURM_TASKS_PER_NODE";
  } else {
    e.local_world_size = 1;
  }
  validate(e, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", local_size_var);
  if (auto addr = env("MASTER_ADDR")) {
    e.master_addr = *addr;
  } else if (auto nodes = env("SLURM_STEP_NODELIST")) {
    e.master_addr = first_slurm_host(*nodes);
  } else if (auto all_nodes = env("SLURM_NODELIST")) {
    e.master_addr = first_slurm_host(*all_nodes);
  }
  e.master_port = port_from_env(port_from_job_id(env("SLURM_JOB_ID")));
  return e;
}

LaunchEnv from_launcher() {
  if (env("RANK") || env("WORLD_SIZE")) return from_torchrun();
  if (env("OMPI_COMM_WORLD_RANK") || env("OMPI_COMM_WORLD_SIZE")) return from_openmpi();
  if (env("SLURM_PROCID")) return from_slurm();
  LaunchEnv e;
  e.source = "default";
  e.master_addr = env("MASTER_ADDR").value_or("127.0.0.1");
  e.master_port = port_from_env(std::nullopt);
  return e;
}

// KOLO_STORE_ADDR=host:port (kolorun sets it: it hosts the store, which so outlives every rank).
void read_store_addr(LaunchEnv& e) {
  auto text = env("KOLO_STORE_ADDR");
  if (!text) return;
  const size_t colon = text->rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text->size())
    throw InvalidArgument("launch environment: KOLO_STORE_ADDR='" + *text + "' is not host:port");
  const std::string port = text->substr(colon + 1);
  int64_t value = parse_integer("KOLO_STORE_ADDR's port", port);
  if (value < 1 || value > 65535)
    throw InvalidArgument("launch environment: KOLO_STORE_ADDR='" + *text + "': port outside [1, 65535]");
  e.store_host = text->substr(0, colon);
  e.store_port = static_cast<uint16_t>(value);
}

}  // namespace

LaunchEnv read_launch_env() {
  LaunchEnv e = from_launcher();
  read_store_addr(e);
  // KOLO_JOIN=1 (kolorun --replace): a replacement that joins a running group.
  if (auto join = env("KOLO_JOIN")) {
    if (*join != "0" && *join != "1") throw InvalidArgument("launch environment: KOLO_JOIN='" + *join + "': expected 0 or 1");
    e.join = *join == "1";
  }
  return e;
}

}  // namespace kolo
