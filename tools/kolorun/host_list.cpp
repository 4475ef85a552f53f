#include "kolorun/host_list.hpp"

#include <charconv>
#include <set>

#include "kolo/error.hpp"

namespace kolo::launcher {

std::vector<HostSlots> parse_host_list(const std::string& text, int max_slots) {
  std::vector<HostSlots> hosts;
  std::set<std::string> seen;
  size_t i = 0;
  while (i <= text.size()) {
    size_t comma = text.find(',', i);
    if (comma == std::string::npos) comma = text.size();
    const std::string entry = text.substr(i, comma - i);
    i = comma + 1;
    HostSlots h;
    const size_t colon = entry.rfind(':');
    h.name = entry.substr(0, colon);
    if (colon != std::string::npos) {
      const std::string count = entry.substr(colon + 1);
      auto [end, ec] = std::from_chars(count.data(), count.data() + count.size(), h.slots);
      if (ec != std::errc() || end != count.data() + count.size() || h.slots < 1 || h.slots > max_slots)
        throw InvalidArgument("--hosts: '" + entry + "' wants a slot count from 1 to " + std::to_string(max_slots));
    }
    if (h.name.empty()) throw InvalidArgument("--hosts: empty host name in '" + text + "'");
    if (!seen.insert(h.name).second)
      throw InvalidArgument("--hosts: " + h.name + " is listed twice (give it one entry with all its slots, " + h.name + ":N)");
    hosts.push_back(h);
  }
  return hosts;
}

int total_slots(const std::vector<HostSlots>& hosts) {
  int n = 0;
  for (const auto& h : hosts) n += h.slots;
  return n;
}

Placement place_rank(const std::vector<HostSlots>& hosts, int rank) {
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (rank < hosts[i].slots) return {static_cast<int>(i), rank, hosts[i].slots, hosts[i].name};
    rank -= hosts[i].slots;
  }
  throw Error("rank beyond the host list's slots");
}

std::vector<std::string> agent_words(const std::string& agent, const std::string& host) {
  std::vector<std::string> words;
  bool placed = false;
  size_t i = 0;
  while (i < agent.size()) {
    if (agent[i] == ' ' || agent[i] == '\t') {
      ++i;
      continue;
    }
    size_t end = agent.find_first_of(" \t", i);
    if (end == std::string::npos) end = agent.size();
    std::string word = agent.substr(i, end - i);
    for (size_t at = word.find("{host}"); at != std::string::npos; at = word.find("{host}", at + host.size())) {
      word.replace(at, 6, host);
      placed = true;
    }
    words.push_back(word);
    i = end;
  }
  if (words.empty()) throw InvalidArgument("--launch-agent is empty");
  if (!placed) words.push_back(host);
  return words;
}

std::vector<std::string> remote_command(const std::string& agent, const std::string& host,
                                        const std::vector<std::string>& variables,
                                        const std::vector<std::string>& program) {
  std::vector<std::string> argv = agent_words(agent, host);
  argv.emplace_back("env");
  argv.insert(argv.end(), variables.begin(), variables.end());
  argv.insert(argv.end(), program.begin(), program.end());
  return argv;
}

}  // namespace kolo::launcher
