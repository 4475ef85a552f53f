// Host identity and the TCP listen address: what decides shm inside a host and TCP across hosts.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include "engine/host_identity.hpp"
#include "engine/listen_address.hpp"
#include "kolo/error.hpp"

namespace kolo::engine {
namespace {

// Runs `change` in a child process and reports whether the child's host identity differs from
// the parent's. -1: the child could not make the change (no privilege), the test then skips.
int identity_differs_after(int (*change)()) {
  const std::string mine = host_identity();
  int pipefd[2];
  if (::pipe(pipefd) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(pipefd[0]);
    char verdict = 'x';
    if (change() == 0) verdict = host_identity() != mine ? 'd' : 's';
    (void)!::write(pipefd[1], &verdict, 1);
    ::_exit(0);
  }
  ::close(pipefd[1]);
  char verdict = 'x';
  (void)!::read(pipefd[0], &verdict, 1);
  ::close(pipefd[0]);
  ::waitpid(pid, nullptr, 0);
  return verdict == 'x' ? -1 : verdict == 'd';
}

TEST(HostIdentity, StableWithinAProcessAndNamesTheNamespaces) {
  const std::string id = host_identity();
  EXPECT_EQ(id, host_identity());
  EXPECT_NE(id.find("/net:"), std::string::npos) << id;
  EXPECT_NE(id.find("/shm:"), std::string::npos) << id;
  EXPECT_EQ(id.find("?"), std::string::npos) << "a namespace could not be read: " << id;
}

TEST(HostIdentity, SameInAChildThatChangesNothing) {
  EXPECT_EQ(identity_differs_after([] { return 0; }), 0);
}

TEST(HostIdentity, DiffersInAnotherNetworkNamespace) {
  // Same hostname, boot id and /dev/shm: only the network namespace differs, as between the
  // "hosts" of tests/multihost.
  int r = identity_differs_after([] { return ::unshare(CLONE_NEWNET); });
  if (r < 0) GTEST_SKIP() << "cannot create a network namespace here (not root?)";
  EXPECT_EQ(r, 1);
}

TEST(HostIdentity, DiffersWithAnotherDevShm) {
  int r = identity_differs_after([] {
    if (::unshare(CLONE_NEWNS) != 0) return -1;
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return -1;
    return ::mount("tmpfs", "/dev/shm", "tmpfs", 0, nullptr);
  });
  if (r < 0) GTEST_SKIP() << "cannot mount a private /dev/shm here (not root?)";
  EXPECT_EQ(r, 1);
}

const std::vector<Ipv4Interface> kInterfaces = {
    {"lo", "127.0.0.1", true}, {"docker0", "172.17.0.1", false}, {"eth0", "10.77.0.10", false},
    {"ib0", "192.168.5.2", false}};

TEST(ListenAddress, DefaultsToLoopbackOnOneHostAndTheFirstExternalElsewhere) {
  EXPECT_EQ(pick_listen_address(kInterfaces, "", true), "127.0.0.1");
  EXPECT_EQ(pick_listen_address(kInterfaces, "", false), "172.17.0.1");
}

TEST(ListenAddress, PrefixExactAndExclusionLists) {
  EXPECT_EQ(pick_listen_address(kInterfaces, "eth", false), "10.77.0.10");
  EXPECT_EQ(pick_listen_address(kInterfaces, "ib,eth", true), "10.77.0.10") << "interface order wins, not list order";
  EXPECT_EQ(pick_listen_address(kInterfaces, "=ib0", false), "192.168.5.2");
  EXPECT_EQ(pick_listen_address(kInterfaces, "^docker", false), "10.77.0.10");
  EXPECT_EQ(pick_listen_address(kInterfaces, "^docker,eth", false), "192.168.5.2");
  EXPECT_EQ(pick_listen_address(kInterfaces, "lo", false), "127.0.0.1") << "loopback when named";
}

TEST(ListenAddress, ExactNamesDoNotMatchPrefixes) {
  EXPECT_THROW(pick_listen_address(kInterfaces, "=eth", false), InvalidArgument);
}

TEST(ListenAddress, NoMatchNamesWhatThereIs) {
  try {
    pick_listen_address(kInterfaces, "enp", false);
    FAIL() << "expected an error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("KOLO_SOCKET_IFNAME='enp'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("eth0 10.77.0.10"), std::string::npos) << e.what();
  }
}

TEST(ListenAddress, SeveralHostsWithOnlyLoopbackIsAnError) {
  EXPECT_THROW(pick_listen_address({{"lo", "127.0.0.1", true}}, "", false), Error);
  EXPECT_EQ(pick_listen_address({{"lo", "127.0.0.1", true}}, "", true), "127.0.0.1");
}

TEST(ListenAddress, EnvironmentOverridesInOrder) {
  ::setenv("KOLO_SOCKET_IFNAME", "lo", 1);
  EXPECT_EQ(listen_address(false), "127.0.0.1");
  ::setenv("KOLO_SOCKET_IFADDR", "10.1.2.3", 1);
  EXPECT_EQ(listen_address(false), "10.1.2.3") << "KOLO_SOCKET_IFADDR takes precedence";
  ::unsetenv("KOLO_SOCKET_IFADDR");
  ::setenv("KOLO_SOCKET_IFNAME", "=no-such-interface", 1);
  EXPECT_THROW(listen_address(true), InvalidArgument);
  ::unsetenv("KOLO_SOCKET_IFNAME");
  EXPECT_EQ(listen_address(true), "127.0.0.1");
}

}  // namespace
}  // namespace kolo::engine
