// Adding a transport is one folder plus one line: its code registers itself
// (KOLO_REGISTER_TRANSPORT, as this file does for "extra") and its folder's name goes in
// kolo_transports (meson.build). Proven here from the outside of libkolo: a transport registered
// by another binary joins the registry in priority order, wherever the linker ran its
// registration, the registry looks it up by name, and a second transport on a taken name or
// priority stops the program.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "transports/transport.hpp"

namespace {

using namespace kolo::transport;

bool reaches_nobody(const Bootstrap&, int) { return false; }
std::unique_ptr<Device> refuse(const Bootstrap&, const std::vector<int>&) {
  throw std::logic_error("the extra transport reaches nobody");
}

// Between tcp (10) and ibverbs (15): registered after libkolo's, listed between them.
KOLO_REGISTER_TRANSPORT(extra, {"extra", 12, &reaches_nobody, &refuse});

TEST(ExtraTransport, TheRegistryListsItInPriorityOrder) {
  std::vector<std::string> names;
  int last = -1;
  for (const auto& t : all_transports()) {
    EXPECT_GT(t.priority, last) << t.name;
    last = t.priority;
    names.push_back(t.name);
  }
  ASSERT_GE(names.size(), 3u);
  EXPECT_EQ(names.front(), "tcp");
  EXPECT_EQ(names.back(), "shm");
  const auto at = std::find(names.begin(), names.end(), "extra");
  ASSERT_NE(at, names.end());
  EXPECT_EQ(at[-1], "tcp");
}

TEST(ExtraTransport, FoundByName) {
  const TransportInfo* t = find_transport("extra");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->priority, 12);
  EXPECT_EQ(find_transport("nope"), nullptr);
}

TEST(ExtraTransportDeathTest, ATakenPriorityOrNameStopsTheProgram) {
  EXPECT_DEATH(TransportRegistration({"other", 10, &reaches_nobody, &refuse}), "cannot be registered: 'tcp'");
  EXPECT_DEATH(TransportRegistration({"extra", 99, &reaches_nobody, &refuse}), "cannot be registered: 'extra'");
}

}  // namespace
