#include "engine/host_identity.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "common/config.hpp"

namespace kolo::engine {
namespace {

// "<dev>:<ino>" of a path (following links: /proc/self/ns/net names the namespace itself), or
// "?" when it cannot be read, which then only ever matches another "?".
std::string file_identity(const char* path) {
  struct stat st{};
  if (::stat(path, &st) != 0) return "?";
  return std::to_string(static_cast<unsigned long long>(st.st_dev)) + ":" +
         std::to_string(static_cast<unsigned long long>(st.st_ino));
}

}  // namespace

std::string host_identity() {
  // An explicit id wins ("id:" keeps it apart from any detected one).
  const std::string forced = config::get_string("KOLO_HOST_ID");
  if (!forced.empty()) return "id:" + forced;
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  return std::string(host) + "/" + boot + "/net:" + file_identity("/proc/self/ns/net") +
         "/shm:" + file_identity("/dev/shm");
}

}  // namespace kolo::engine
