#include "kolorun/job_environment.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "kolo/error.hpp"
#include "kolorun/fd_util.hpp"
#include "kolorun/host_list.hpp"

extern char** environ;

namespace kolo::launcher {
namespace {

void set_variable(std::vector<std::string>& env, const std::string& name, const std::string& value) {
  std::string prefix = name + "=";
  std::erase_if(env, [&](const std::string& entry) { return entry.rfind(prefix, 0) == 0; });
  env.push_back(prefix + value);
}

}  // namespace

std::string random_hex(size_t bytes) {
  UniqueFd urandom(::open("/dev/urandom", O_RDONLY | O_CLOEXEC));
  if (!urandom.valid()) throw Error(system_error_text("cannot open /dev/urandom", errno));
  std::string raw(bytes, '\0');
  size_t done = 0;
  while (done < bytes) {
    ssize_t n = ::read(urandom.get(), raw.data() + done, bytes - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(system_error_text("cannot read /dev/urandom", n < 0 ? errno : EIO));
    done += static_cast<size_t>(n);
  }
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes * 2);
  for (unsigned char c : raw) {
    hex += kDigits[c >> 4];
    hex += kDigits[c & 0xf];
  }
  return hex;
}

int pick_free_port() {
  UniqueFd sock(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!sock.valid()) throw Error(system_error_text("cannot create a socket to pick MASTER_PORT", errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    throw Error(system_error_text("cannot bind 127.0.0.1:0 to pick MASTER_PORT", errno));
  socklen_t len = sizeof addr;
  if (::getsockname(sock.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw Error(system_error_text("cannot read the port picked for MASTER_PORT", errno));
  return ntohs(addr.sin_port);
}

JobIdentity make_job_identity(const LaunchOptions& options) {
  JobIdentity identity;
  identity.job_id = random_hex(8);
  identity.master_addr = options.master_addr;
  identity.master_port = options.master_port ? *options.master_port : pick_free_port();

  for (const auto& [name, value] : options.extra_env)
    if (name == "KOLO_SECRET") identity.secret = value;
  if (identity.secret.empty()) {
    const char* inherited = std::getenv("KOLO_SECRET");
    identity.secret = (inherited != nullptr && *inherited != '\0') ? inherited : random_hex(16);
  }
  return identity;
}

std::vector<std::string> launch_variables(const LaunchOptions& options, const JobIdentity& identity, int rank) {
  std::vector<std::string> env;
  for (const auto& [name, value] : options.extra_env) set_variable(env, name, value);
  // One host unless --hosts: then ranks fill the hosts slot by slot, GROUP_RANK is the host's
  // index and LOCAL_* count the ranks on it, as torchrun sets them per node.
  const Placement where = options.hosts.empty() ? Placement{0, rank, options.nproc, ""} : place_rank(options.hosts, rank);
  set_variable(env, "RANK", std::to_string(rank));
  set_variable(env, "WORLD_SIZE", std::to_string(options.nproc));
  set_variable(env, "LOCAL_RANK", std::to_string(where.local_rank));
  set_variable(env, "LOCAL_WORLD_SIZE", std::to_string(where.local_size));
  set_variable(env, "GROUP_RANK", std::to_string(where.host_index));
  set_variable(env, "MASTER_ADDR", identity.master_addr);
  set_variable(env, "MASTER_PORT", std::to_string(identity.master_port));
  set_variable(env, "TORCHELASTIC_RUN_ID", identity.job_id);
  set_variable(env, "KOLO_JOB_ID", identity.job_id);
  set_variable(env, "KOLO_SECRET", identity.secret);
  if (!identity.store_addr.empty()) set_variable(env, "KOLO_STORE_ADDR", identity.store_addr);
  return env;
}

std::vector<std::string> rank_environment(const std::vector<std::string>& base,
                                          const LaunchOptions& options,
                                          const JobIdentity& identity, int rank) {
  std::vector<std::string> env = base;
  for (const std::string& entry : launch_variables(options, identity, rank)) {
    const size_t eq = entry.find('=');
    set_variable(env, entry.substr(0, eq), entry.substr(eq + 1));
  }
  // Bound one rank per CPU, a rank sees one CPU and would take the host for oversubscribed
  // (KOLO_YIELD_WHEN_IDLE=auto compares its own CPUs with the ranks on the host) and yield at
  // every poll: tell it the ranks have a CPU each, as mpirun sets mpi_yield_when_idle from its
  // placement. A value the user set, here or through -x, stays.
  const std::string yield = "KOLO_YIELD_WHEN_IDLE=";
  if (!options.rank_cpus.empty() &&
      std::none_of(env.begin(), env.end(), [&](const std::string& e) { return e.rfind(yield, 0) == 0; }))
    env.push_back(yield + "0");
  return env;
}

std::vector<std::string> current_environment() {
  std::vector<std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) env.emplace_back(*entry);
  return env;
}

}  // namespace kolo::launcher
