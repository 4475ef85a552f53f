// Which ranks share a host: equal identities mean the ranks can reach each other through shared
// memory (shm transport, CMA), different ones mean they must use the network.
#pragma once
#include <string>

namespace kolo::engine {

// "<hostname>/<kernel boot id>/net:<netns inode>/shm:<dev>:<ino of /dev/shm>". The hostname
// and boot id alone are not enough: containers and network namespaces on one machine share
// both, yet cannot meet on an abstract unix socket (the shm transport's rendezvous, which is
// per network namespace) and may not see the same /dev/shm.
std::string host_identity();

}  // namespace kolo::engine
