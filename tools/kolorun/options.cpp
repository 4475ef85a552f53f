#include "kolorun/options.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "common/cli.hpp"
#include "kolo/error.hpp"

namespace kolo::launcher {
namespace {

// Variables kolorun sets itself; letting -x override them would silently break rendezvous.
constexpr std::array<std::pair<std::string_view, std::string_view>, 11> kReservedVariables{{
    {"RANK", "it is set per rank"},
    {"WORLD_SIZE", "use -n"},
    {"LOCAL_RANK", "it is set per rank"},
    {"LOCAL_WORLD_SIZE", "use -n"},
    {"GROUP_RANK", "it is set per host (--hosts)"},
    {"MASTER_ADDR", "use --master-addr"},
    {"MASTER_PORT", "use --master-port"},
    {"TORCHELASTIC_RUN_ID", "it is generated per launch"},
    {"KOLO_JOB_ID", "it is generated per launch"},
    {"KOLO_STORE_ADDR", "kolorun hosts the job's store itself"},
    {"KOLO_JOIN", "kolorun --replace sets it for the replacements it starts"},
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

// What the command line says, as typed: CLI11 splits it (attached or separate values, -x
// repeated, the program and its arguments); the checks and conversions above then run in
// parse_launch_options, so that every message is kolorun's.
struct RawOptions {
  std::string nproc, timeout, master_addr, master_port, hosts, launch_agent, bind, replace, store_addr;
  std::vector<std::string> extra_env;
  bool tag_output = false, elastic = false, help = false, version = false;
  // Set when the option was given.
  CLI::Option *nproc_opt = nullptr, *timeout_opt = nullptr, *master_addr_opt = nullptr, *master_port_opt = nullptr,
              *hosts_opt = nullptr, *launch_agent_opt = nullptr, *bind_opt = nullptr, *replace_opt = nullptr,
              *store_addr_opt = nullptr;
};

const char* const kUsage =
    "Usage: kolorun [options] -n N program [args...]\n"
    "       kolorun [options] --hosts h0:N,h1:N [--launch-agent CMD] program [args...]\n";

// kolorun's options, bound to `raw`. prefix_command: the first argument that is not an option
// (or the one after "--") is the program, and it and everything after it are left, untouched, in
// remaining().
void define_options(CLI::App& app, RawOptions& raw) {
  cli::configure(app, kUsage);
  app.prefix_command();
  app.description(
      "Starts N copies of program on this machine (or on the hosts), each with RANK, WORLD_SIZE, LOCAL_RANK,\n"
      "LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT, KOLO_JOB_ID,\n"
      "TORCHELASTIC_RUN_ID and KOLO_SECRET set, and supervises them.");
  raw.nproc_opt = app.add_option("-n,--nproc,--nproc-per-node,--nproc_per_node", raw.nproc,
                                 "number of ranks to start (1.." + std::to_string(kMaxProcesses) +
                                     ", required);\nalso spelled -np N (mpirun)")
                      ->type_name("N");
  app.add_flag("-t,--tag-output", raw.tag_output, "prefix every output line with \"[rank]: \"");
  app.add_flag("--elastic", raw.elastic,
               "a rank that dies does not stop the others (they may shrink\n"
               "their group and go on); the job fails only if a rank exits\n"
               "non-zero, or none exits 0");
  raw.replace_opt = app.add_option("--replace", raw.replace,
                                   "with --elastic: when a rank is lost (killed by a signal),\n"
                                   "start a replacement with its command line, environment and\n"
                                   "KOLO_JOIN=1 (it joins the survivors' group: ProcessGroup::join),\n"
                                   "at most N over the job (default 0: none; needs the store\n"
                                   "kolorun hosts: with --hosts, give --store-addr)")
                       ->type_name("N");
  raw.timeout_opt = app.add_option("--timeout", raw.timeout, "stop the whole job and fail if it runs longer")
                        ->type_name("SECONDS");
  raw.master_addr_opt =
      app.add_option("--master-addr", raw.master_addr, "MASTER_ADDR for the ranks (default 127.0.0.1)")->type_name("ADDR");
  raw.master_port_opt =
      app.add_option("--master-port", raw.master_port, "MASTER_PORT for the ranks (default: a free port)")->type_name("PORT");
  raw.hosts_opt = app.add_option("-H,--hosts,--host", raw.hosts,
                                 "run on these hosts, as mpirun -H: host[:slots],... (slots default\n"
                                 "1); ranks fill the hosts in order, -n is their total slots,\n"
                                 "GROUP_RANK the host's index, MASTER_ADDR the first host")
                      ->type_name("LIST");
  raw.store_addr_opt = app.add_option("--store-addr", raw.store_addr,
                                      "host the ranks' store at ADDR, an address of this machine\n"
                                      "that every host reaches, so that with --hosts too it\n"
                                      "outlives every rank (--elastic, --replace); default\n"
                                      "127.0.0.1 for a job on this host, rank 0 with --hosts")
                           ->type_name("ADDR");
  raw.launch_agent_opt = app.add_option("--launch-agent", raw.launch_agent,
                                        "how to start a rank on a host (default \"ssh -o BatchMode=yes\");\n"
                                        "{host} is replaced by the host, else it is appended. The\n"
                                        "agent gets CMD's words, then env VAR=VALUE... program args\n"
                                        "(e.g. 'ip netns exec {host}', 'docker exec {host}')")
                             ->type_name("CMD");
  // One value per -x (allow_extra_args false): "-x A=1 prog" must leave prog to be the program.
  app.add_option("-x", raw.extra_env, "set VAR for every rank (repeatable); -x VAR copies kolorun's value")
      ->type_name("VAR=VALUE")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  raw.bind_opt = app.add_option("--bind-to", raw.bind,
                                "core: bind rank i to the i-th CPU kolorun may use (as mpirun\n"
                                "does); none: leave placement to the scheduler; auto (default):\n"
                                "core when the ranks run here and there are no more of them than\n"
                                "CPUs, else none. Bound ranks get KOLO_YIELD_WHEN_IDLE=0 unless set")
                     ->type_name("WHAT");
  cli::add_help(app, raw.help);
  app.add_flag("-V,--version", raw.version, "show the version");
  app.footer(
      "  --                        end of kolorun options: what follows is the program and its\n"
      "                            arguments, even if it starts with '-'\n"
      "\n"
      "For a job on this host (or with --store-addr) kolorun hosts the ranks' store\n"
      "(KOLO_STORE_ADDR), so it outlives every rank. When a rank fails (without\n"
      "--elastic), the others get KOLO_LAUNCH_GRACE seconds (default 5) to exit on\n"
      "their own, then SIGTERM, then SIGKILL after another grace period. kolorun exits with\n"
      "the first failing rank's status (128+signal if it was killed), 124 on --timeout,\n"
      "127 if the program cannot be found. SIGINT, SIGTERM, SIGHUP and SIGQUIT are\n"
      "forwarded to every rank.");
}

// The hand-written part CLI11 cannot express (see options.hpp): kolorun's options before the
// program, with mpirun's "-np N" rewritten to "--nproc N" (CLI11's short options are one letter,
// so it would read "-np" as -n with the value "p"), and an empty "--option=" refused (CLI11 would
// take the next argument as its value instead). It walks the arguments as CLI11 will: an option
// that takes a value and has none attached eats the next argument, a cluster of short flags
// ("-tx VAR") ends at the first letter that takes a value, and the options end at "--" or at the
// first argument that is not one (the program).
std::vector<std::string> prepare_arguments(std::vector<std::string> args, const CLI::App& app) {
  auto takes_value = [&](const std::string& name) {
    const CLI::Option* o = app.get_option_no_throw(name);
    return o != nullptr && o->get_type_size_max() > 0;
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--" || arg.size() < 2 || arg[0] != '-') break;
    if (arg == "-np") {
      args[i] = "--nproc";
      ++i;  // its value
    } else if (arg.rfind("--", 0) == 0) {
      const size_t eq = arg.find('=');
      if (eq == std::string::npos) {
        if (takes_value(arg)) ++i;
      } else if (eq + 1 == arg.size() && takes_value(arg.substr(0, eq))) {
        throw InvalidArgument(arg.substr(0, eq) + " needs a non-empty value");
      }
    } else {
      for (size_t j = 1; j < arg.size(); ++j) {
        const std::string letter{'-', arg[j]};
        if (app.get_option_no_throw(letter) == nullptr) break;  // unknown: refused after parsing
        if (takes_value(letter)) {
          if (j + 1 == arg.size()) ++i;  // "-n 4", "-tx VAR"; else attached: "-n4"
          break;
        }
      }
    }
  }
  return args;
}

}  // namespace

LaunchOptions parse_launch_options(const std::vector<std::string>& args) {
  CLI::App app{"", "kolorun"};
  RawOptions raw;
  define_options(app, raw);
  try {
    cli::parse(app, prepare_arguments(args, app));
  } catch (const CLI::Error& e) {  // unknown option, missing value, a value given to a flag
    throw InvalidArgument(e.what());
  }

  LaunchOptions options;
  // What CLI11 left: the program and its arguments, after a "--" if there was one. An option it
  // did not know lands there too (before the program): refused, as is a "-5" CLI11 took for a
  // positional argument.
  std::vector<std::string> rest = app.remaining();
  if (!rest.empty() && rest.front() == "--") {
    rest.erase(rest.begin());
  } else if (!rest.empty() && rest.front().size() > 1 && rest.front()[0] == '-') {
    throw InvalidArgument("unknown option '" + rest.front() + "'");
  }
  options.program = std::move(rest);
  options.tag_output = raw.tag_output;
  options.elastic = raw.elastic;
  options.show_help = raw.help;
  options.show_version = raw.version;

  const bool have_master_addr = raw.master_addr_opt->count() > 0;
  bool have_nproc = raw.nproc_opt->count() > 0;
  if (have_nproc) options.nproc = parse_int_in_range("-n", raw.nproc, 1, kMaxProcesses);
  if (raw.timeout_opt->count() > 0) options.timeout_seconds = parse_seconds("--timeout", raw.timeout, false);
  if (have_master_addr) {
    options.master_addr = raw.master_addr;
    if (options.master_addr.empty()) throw InvalidArgument("--master-addr needs a non-empty value");
  }
  if (raw.master_port_opt->count() > 0) options.master_port = parse_int_in_range("--master-port", raw.master_port, 1, 65535);
  if (raw.hosts_opt->count() > 0) options.hosts = parse_host_list(raw.hosts, kMaxProcesses);
  if (raw.launch_agent_opt->count() > 0) {
    options.launch_agent = raw.launch_agent;
    agent_words(options.launch_agent, "h");  // rejects an empty agent now, not per rank
  }
  if (raw.bind_opt->count() > 0) options.bind = parse_bind_mode(raw.bind);
  if (raw.store_addr_opt->count() > 0) {
    options.store_addr = raw.store_addr;
    if (options.store_addr.empty()) throw InvalidArgument("--store-addr needs a non-empty value");
  }
  if (raw.replace_opt->count() > 0) options.replace = parse_int_in_range("--replace", raw.replace, 0, kMaxProcesses);
  for (const std::string& spec : raw.extra_env) options.extra_env.push_back(parse_extra_env(spec));

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
  if (options.replace > 0 && !options.elastic)
    throw InvalidArgument("--replace needs --elastic (without it a lost rank stops the job)");
  if (options.replace > 0 && !options.hosts.empty() && options.store_addr.empty())
    throw InvalidArgument("--replace needs the store kolorun hosts; with --hosts rank 0 hosts it unless --store-addr says where kolorun should");
  if (options.program.empty()) throw InvalidArgument("no program to run");
  return options;
}

std::string usage_text() {
  CLI::App app{"", "kolorun"};
  RawOptions raw;
  define_options(app, raw);
  return cli::help(app);
}

double parse_grace_seconds(const char* value) {
  if (value == nullptr || *value == '\0') return kDefaultGraceSeconds;
  return parse_seconds("KOLO_LAUNCH_GRACE", value, true);
}

}  // namespace kolo::launcher
