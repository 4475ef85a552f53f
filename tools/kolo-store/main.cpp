// kolo-store: runs a TCPStore server with no client, for jobs whose ranks should all be plain
// clients (e.g. launched by a scheduler). Serves until SIGINT or SIGTERM.
//
//   kolo-store [--host H] [--port P]     defaults: 127.0.0.1 and 29500; port 0 picks a free one
//
// (Command line: CLI11, common/cli.hpp. Exit status 2 on a bad one.)
//
// Prints "kolo-store: listening on H:PORT" (the real port) once it accepts connections, after
// "kolo-store: authentication on|off ..." on stderr.
//
// Authentication (docs/RELIABILITY.md "Authentication") follows KOLO_STORE_AUTH: on, off, or
// auto = on when KOLO_SECRET is in this process's environment (whoever gave the store the job's
// secret means its clients to prove it). With it on, only kolo clients holding that secret are
// served; torch's TCPStore clients cannot authenticate.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "common/cli.hpp"
#include "kolo/store.hpp"

namespace {

bool parse_port(const std::string& text, uint16_t* port) {
  char* end = nullptr;
  long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || value < 0 || value > 65535) return false;
  *port = static_cast<uint16_t>(value);
  return true;
}

const char* env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

}  // namespace

int main(int argc, char** argv) {
  std::string host = "127.0.0.1";
  std::string port_text = "29500";
  bool help = false, version = false;
  CLI::App app{"", "kolo-store"};
  kolo::cli::configure(app, "usage: kolo-store [--host HOST] [--port PORT]\n");
  app.description(
      "  Runs a kolo TCPStore server until SIGINT/SIGTERM.\n"
      "  Clients must prove KOLO_SECRET when KOLO_STORE_AUTH is on, or auto (the default) and\n"
      "  KOLO_SECRET is set; torch's TCPStore clients cannot, so leave both unset for them.");
  app.add_option("--host", host, "address to listen on (default 127.0.0.1; 0.0.0.0 for all interfaces)")
      ->type_name("HOST");
  app.add_option("--port", port_text, "TCP port (default 29500; 0 picks a free port)")->type_name("PORT");
  kolo::cli::add_help(app, help);
  app.add_flag("-V,--version", version, "show the version");
  try {
    kolo::cli::parse(app, std::vector<std::string>(argv + 1, argv + argc));
  } catch (const CLI::Error& e) {
    std::fprintf(stderr, "kolo-store: %s\n%s", e.what(), kolo::cli::help(app).c_str());
    return 2;
  }
  if (help) {
    std::fputs(kolo::cli::help(app).c_str(), stdout);
    return 0;
  }
  if (version) {
    std::printf("kolo-store (kolo) %s\n", KOLO_VERSION);
    return 0;
  }
  uint16_t port = 0;
  if (!parse_port(port_text, &port)) {
    std::fprintf(stderr, "kolo-store: invalid port '%s'\n", port_text.c_str());
    return 2;
  }

  // Block the stop signals before the server thread exists so that only sigwait() sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  const std::string auth_mode = *env_or_empty("KOLO_STORE_AUTH") ? env_or_empty("KOLO_STORE_AUTH") : "auto";
  const std::string secret = env_or_empty("KOLO_SECRET");
  if (auth_mode != "auto" && auth_mode != "on" && auth_mode != "off") {
    std::fprintf(stderr, "kolo-store: KOLO_STORE_AUTH='%s' is not one of auto, on, off\n", auth_mode.c_str());
    return 2;
  }
  if (auth_mode == "on" && secret.empty()) {
    std::fprintf(stderr, "kolo-store: KOLO_STORE_AUTH=on needs the job secret in KOLO_SECRET\n");
    return 2;
  }
  const bool authenticate = auth_mode != "off" && !secret.empty();

  std::unique_ptr<kolo::TCPStoreServer> server;
  try {
    server = kolo::TCPStoreServer::start(host, port, authenticate ? secret : std::string());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kolo-store: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "kolo-store: authentication %s\n",
               authenticate ? "on (clients must prove KOLO_SECRET)" : "off (anyone who reaches the port may read and write keys)");
  std::printf("kolo-store: listening on %s:%u\n", host.c_str(), unsigned(server->port()));
  std::fflush(stdout);

  int signal_number = 0;
  while (sigwait(&stop_signals, &signal_number) != 0) {
  }
  std::printf("kolo-store: stopping on signal %d\n", signal_number);
  std::fflush(stdout);
  server.reset();
  return 0;
}
