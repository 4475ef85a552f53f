#include "kolorun/store_host.hpp"

#include <cstdlib>

#include "kolo/error.hpp"

namespace kolo::launcher {

std::string store_secret(const LaunchOptions& options, const std::string& job_secret) {
  std::string mode;
  if (const char* inherited = std::getenv("KOLO_STORE_AUTH")) mode = inherited;
  for (const auto& [name, value] : options.extra_env)
    if (name == "KOLO_STORE_AUTH") mode = value;
  // The ranks refuse any other value themselves, with a message naming it.
  return mode == "off" ? std::string() : job_secret;
}

HostedStore host_store(const std::string& host, const std::string& secret) {
  HostedStore hosted;
  try {
    hosted.server = TCPStoreServer::start(host, 0, secret);
  } catch (const std::exception& e) {
    throw Error("cannot host the job's store on " + host + ": " + e.what());
  }
  hosted.address = host + ":" + std::to_string(hosted.server->port());
  return hosted;
}

}  // namespace kolo::launcher
