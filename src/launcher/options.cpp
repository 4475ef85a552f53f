#include "launcher/options.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "kolo/error.hpp"

namespace kolo::launcher {
namespace {

// Variables kolorun sets itself; letting -x override them would silently break rendezvous.
constexpr std::array<std::pair<std::string_view, std::string_view>, 9> kReservedVariables{{
    {"RANK", "it is set per rank"},
    {"WORLD_SIZE", "use -n"},
    {"LOCAL_RANK", "it is set per rank"},
    {"LOCAL_WORLD_SIZE", "use -n"},
    {"GROUP_RANK", "it is set per host (--hosts)"},
    {"MASTER_ADDR", "use --master-addr"},
    {"MASTER_PORT", "use --master-port"},
    {"TORCHELASTIC_RUN_ID", "it is generated per launch"},
    {"KOLO_JOB_ID", "it is generated per launch"},
}};

int parse_int_in_range(std::string_view option, std::string_view text, int low, int high) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < low || value > high)
    throw InvalidArgument(std::string(option) + " expects an integer from " + std::to_string(low) +
                          " to " + std::to_string(high) + ", got '" + std::string(text) + "'");
  return value;
}

// Seconds as a finite, non-negative decimal ("5", "0.5"); zero allowed only when allow_zero.
double parse_seconds(std::string_view what, const std::string& text, bool allow_zero) {
  char* end = nullptr;
  double value = text.empty() ? NAN : std::strtod(text.c_str(), &end);
  bool ok = !text.empty() && end == text.c_str() + text.size() && std::isfinite(value) &&
            (allow_zero ? value >= 0 : value > 0) && value <= 1e7;
  if (!ok)
    throw InvalidArgument(std::string(what) + " expects " +
                          (allow_zero ? "a non-negative" : "a positive") + " number of seconds, got '" +
                          text + "'");
  return value;
}

bool is_variable_name(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (char c : name) {
    bool ok = c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

std::pair<std::string, std::string> parse_extra_env(const std::string& spec) {
  size_t eq = spec.find('=');
  std::string name = spec.substr(0, eq);
  if (!is_variable_name(name))
    throw InvalidArgument("-x expects VAR=VALUE with a valid variable name, got '" + spec + "'");
  for (auto [reserved, hint] : kReservedVariables)
    if (name == reserved)
      throw InvalidArgument("-x cannot set " + name + ": " + std::string(hint));
  if (eq != std::string::npos) return {name, spec.substr(eq + 1)};
  // "-x VAR" exports kolorun's own value, as mpirun does.
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) throw InvalidArgument("-x " + name + ": " + name + " is not set in kolorun's environment");
  return {name, value};
}

}  // namespace

LaunchOptions parse_launch_options(const std::vector<std::string>& args) {
  LaunchOptions options;
  bool have_nproc = false;
  bool have_master_addr = false;
  size_t i = 0;

  // Returns the option's value: the text after '=' (long form), after the letter (short form,
  // "-n4"), or the next argument.
  auto take_value = [&](std::string_view name, const std::optional<std::string>& attached) {
    if (attached) return *attached;
    if (i + 1 >= args.size()) throw InvalidArgument(std::string(name) + " needs a value");
    return args[++i];
  };

  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') break;  // the program: options end here

    std::string name = arg;
    std::optional<std::string> attached;
    if (arg.rfind("--", 0) == 0) {
      size_t eq = arg.find('=');
      if (eq != std::string::npos) {
        name = arg.substr(0, eq);
        attached = arg.substr(eq + 1);
      }
    } else if (arg == "-np") {
      name = arg;  // mpirun's spelling: a whole word, not -n with "p" attached
    } else if (arg.size() > 2) {
      name = arg.substr(0, 2);
      attached = arg.substr(2);
    }

    auto reject_value = [&] {
      if (attached) throw InvalidArgument(name + " takes no value");
    };

    // -n / --nproc, and the habits of mpirun (-np) and torchrun (--nproc_per_node / --nproc-per-node:
    // one machine here, so all ranks are on this node).
    if (name == "-n" || name == "--nproc" || name == "-np" || name == "--nproc_per_node" || name == "--nproc-per-node") {
      options.nproc = parse_int_in_range(name, take_value(name, attached), 1, kMaxProcesses);
      have_nproc = true;
    } else if (name == "-t" || name == "--tag-output") {
      reject_value();
      options.tag_output = true;
    } else if (name == "--timeout") {
      options.timeout_seconds = parse_seconds(name, take_value(name, attached), false);
    } else if (name == "--master-addr") {
      options.master_addr = take_value(name, attached);
      have_master_addr = true;
      if (options.master_addr.empty()) throw InvalidArgument("--master-addr needs a non-empty value");
    } else if (name == "--master-port") {
      options.master_port = parse_int_in_range(name, take_value(name, attached), 1, 65535);
    } else if (name == "-H" || name == "--hosts" || name == "--host") {
      options.hosts = parse_host_list(take_value(name, attached), kMaxProcesses);
    } else if (name == "--launch-agent") {
      options.launch_agent = take_value(name, attached);
      agent_words(options.launch_agent, "h");  // rejects an empty agent now, not per rank
    } else if (name == "--bind-to") {
      options.bind = parse_bind_mode(take_value(name, attached));
    } else if (name == "-x") {
      options.extra_env.push_back(parse_extra_env(take_value(name, attached)));
    } else if (name == "-h" || name == "--help") {
      reject_value();
      options.show_help = true;
    } else if (name == "-V" || name == "--version") {
      reject_value();
      options.show_version = true;
    } else {
      throw InvalidArgument("unknown option '" + arg + "'");
    }
  }
  options.program.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());

  if (options.show_help || options.show_version) return options;
  if (!options.hosts.empty()) {
    // The host list says how many ranks there are; -n may repeat it, as mpirun allows.
    const int slots = total_slots(options.hosts);
    if (slots > kMaxProcesses) throw InvalidArgument("--hosts has " + std::to_string(slots) + " slots, more than " + std::to_string(kMaxProcesses));
    if (have_nproc && options.nproc != slots)
      throw InvalidArgument("-n " + std::to_string(options.nproc) + " does not match the " + std::to_string(slots) +
                            " slots of --hosts");
    options.nproc = slots;
    have_nproc = true;
    // Rank 0 runs on the first host and serves the store there, as under Slurm.
    if (!have_master_addr) options.master_addr = options.hosts.front().name;
  }
  if (!have_nproc) throw InvalidArgument("-n/--nproc is required (or --hosts)");
  if (options.program.empty()) throw InvalidArgument("no program to run");
  return options;
}

std::string usage_text() {
  return "Usage: kolorun [options] -n N program [args...]\n"
         "       kolorun [options] --hosts h0:N,h1:N [--launch-agent CMD] program [args...]\n"
         "Starts N copies of program on this machine (or on the hosts), each with RANK, WORLD_SIZE, LOCAL_RANK,\n"
         "LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT, KOLO_JOB_ID,\n"
         "TORCHELASTIC_RUN_ID and KOLO_SECRET set, and supervises them.\n"
         "\n"
         "Options:\n"
         "  -n, --nproc N          number of ranks to start (1.." + std::to_string(kMaxProcesses) + ", required);\n"
         "                         also spelled -np N (mpirun) or --nproc_per_node N (torchrun)\n"
         "  -t, --tag-output       prefix every output line with \"[rank]: \"\n"
         "      --timeout SECONDS  stop the whole job and fail if it runs longer\n"
         "      --master-addr ADDR MASTER_ADDR for the ranks (default 127.0.0.1)\n"
         "      --master-port PORT MASTER_PORT for the ranks (default: a free port)\n"
         "  -H, --hosts LIST       run on these hosts, as mpirun -H: host[:slots],... (slots default\n"
         "                         1); ranks fill the hosts in order, -n is their total slots,\n"
         "                         GROUP_RANK the host's index, MASTER_ADDR the first host\n"
         "      --launch-agent CMD how to start a rank on a host (default \"ssh -o BatchMode=yes\");\n"
         "                         {host} is replaced by the host, else it is appended. The\n"
         "                         agent gets CMD's words, then env VAR=VALUE... program args\n"
         "                         (e.g. 'ip netns exec {host}', 'docker exec {host}')\n"
         "  -x VAR=VALUE           set VAR for every rank (repeatable); -x VAR copies kolorun's value\n"
         "      --bind-to WHAT     core: bind rank i to the i-th CPU kolorun may use (as mpirun\n"
         "                         does); none: leave placement to the scheduler; auto (default):\n"
         "                         core when the ranks run here and there are no more of them than\n"
         "                         CPUs, else none. Bound ranks get KOLO_YIELD_WHEN_IDLE=0 unless set\n"
         "  -h, --help             show this help\n"
         "  -V, --version          show the version\n"
         "  --                     end of kolorun options\n"
         "\n"
         "When a rank fails, the others get KOLO_LAUNCH_GRACE seconds (default 5) to exit on\n"
         "their own, then SIGTERM, then SIGKILL after another grace period. kolorun exits with\n"
         "the first failing rank's status (128+signal if it was killed), 124 on --timeout,\n"
         "127 if the program cannot be found. SIGINT, SIGTERM, SIGHUP and SIGQUIT are\n"
         "forwarded to every rank.\n";
}

double parse_grace_seconds(const char* value) {
  if (value == nullptr || *value == '\0') return kDefaultGraceSeconds;
  return parse_seconds("KOLO_LAUNCH_GRACE", value, true);
}

}  // namespace kolo::launcher
