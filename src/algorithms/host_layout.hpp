// Which ranks of a group share a host, as algorithms see it. The engine builds it once per
// group from the host identities exchanged at bootstrap; every rank builds the same one, so
// every rank makes the same algorithm choice.
#pragma once
#include <string>
#include <vector>

namespace kolo::algo {

struct HostLayout {
  std::vector<int> host_of;               // per rank: host index, numbered in order of first rank
  std::vector<std::vector<int>> members;  // per host: its ranks, ascending
  int max_per_host = 0;                   // ranks on the fullest host (kept so the cost model reads it in O(1))

  // From one identity string per rank (equal strings: same host).
  static HostLayout from_ids(const std::vector<std::string>& ids);
  // From one host index per rank (any integers; equal: same host).
  static HostLayout from_indices(const std::vector<int>& index);
  // Every rank on one host.
  static HostLayout single_host(int nranks);

  int size() const { return static_cast<int>(host_of.size()); }
  int num_hosts() const { return static_cast<int>(members.size()); }
  // More than one host, and some host holds more than one rank: what a hierarchical algorithm
  // needs to be worth running.
  bool hierarchical() const;
  // Every host holds the same number of ranks and each host's ranks are consecutive (ranks
  // k*L .. k*L+L-1 on host k): the all-gather and reduce-scatter blocks of a host are then one
  // contiguous region. The usual placement of a launcher that fills hosts in order.
  bool uniform_blocks() const;
  // The layout of the ranks `ranks` (in that order) as a group of their own.
  HostLayout restricted_to(const std::vector<int>& ranks) const;
};

}  // namespace kolo::algo
