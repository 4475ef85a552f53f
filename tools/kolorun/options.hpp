// kolorun's command line, parsed with CLI11 (common/cli.hpp) as a prefix command: everything
// from the program name on reaches the program untouched, even arguments that look like kolorun
// options ("kolorun -n 2 prog -n 9 --help"). One small hand-written step remains, for mpirun's
// "-np" (options.cpp, prepare_arguments).
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kolorun/cpu_binding.hpp"
#include "kolorun/host_list.hpp"

namespace kolo::launcher {

// More ranks than this would need more pipes than a default descriptor limit allows.
constexpr int kMaxProcesses = 1024;

struct LaunchOptions {
  int nproc = 0;
  bool tag_output = false;
  // --elastic: a rank that dies does not stop the others (they may shrink their group and go on).
  bool elastic = false;
  // --replace N (with --elastic, on this host): when a rank is lost (ended by a signal), start a
  // replacement with its command line, environment and KOLO_JOIN=1, up to N over the job, so
  // that the survivors can grow their group back (ProcessGroup::grow / join).
  int replace = 0;
  std::optional<double> timeout_seconds;
  std::string master_addr = "127.0.0.1";
  std::optional<int> master_port;
  // -x VAR=VALUE (or -x VAR, copying kolorun's own value), in command-line order.
  std::vector<std::pair<std::string, std::string>> extra_env;
  // --hosts: where the ranks run (empty: all here, started directly); each rank on a listed host
  // is started through launch_agent.
  std::vector<HostSlots> hosts;
  std::string launch_agent = "ssh -o BatchMode=yes";
  // --store-addr: the address kolorun hosts the ranks' store on (an address of this machine that
  // every host reaches). Empty: 127.0.0.1 for a job on this host; with --hosts, rank 0 serves it.
  std::string store_addr;
  BindMode bind = BindMode::automatic;  // --bind-to (cpu_binding.hpp)
  // The CPU each rank is bound to (plan_binding, filled by main from `bind`); empty: unbound.
  std::vector<int> rank_cpus;
  std::vector<std::string> program;  // the program and its arguments
  bool show_help = false;
  bool show_version = false;
};

// args excludes argv[0]. Throws kolo::InvalidArgument naming the offending option.
// With --help or --version the remaining requirements (-n, a program) are not checked.
LaunchOptions parse_launch_options(const std::vector<std::string>& args);

std::string usage_text();

// KOLO_LAUNCH_GRACE: seconds (fractions allowed) given to ranks between "please stop" and the
// next, harsher step. nullptr means unset. Throws kolo::InvalidArgument on a malformed value.
constexpr double kDefaultGraceSeconds = 5.0;
double parse_grace_seconds(const char* value);

}  // namespace kolo::launcher
