// Logging: every line carries UTC time, host:pid:tid, rank, level and subsystem;
// KOLO_DEBUG_SUBSYS filters the chatty levels like NCCL_DEBUG_SUBSYS; KOLO_DEBUG_FILE writes a
// file per process with %h/%p/%r expanded.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "common/log.hpp"

namespace {

using kolo::log::Subsys;
using kolo::log::subsys_of;

static_assert(subsys_of("/x/transports/tcp/tcp_device.cpp") == Subsys::net);
static_assert(subsys_of("../transports/shm/shm_pair.cpp") == Subsys::shm);
static_assert(subsys_of("transports/ibverbs/ib_port.cpp") == Subsys::ib);
static_assert(subsys_of("src/engine/bootstrap.cpp") == Subsys::init);
static_assert(subsys_of("src/engine/executor.cpp") == Subsys::coll);
static_assert(subsys_of("src/store/tcp_store.cpp") == Subsys::store);
static_assert(subsys_of("../common/config.cpp") == Subsys::env);
static_assert(subsys_of("../transports/common/auth.cpp") == Subsys::coll);

// Points KOLO_DEBUG_FILE at a fresh folder for one test, and puts everything back afterwards.
class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("kolo-log-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    setenv("KOLO_DEBUG_FILE", (dir_.string() + "/log.%h.%p.%r.txt").c_str(), 1);
  }
  void TearDown() override {
    unsetenv("KOLO_DEBUG_FILE");
    unsetenv("KOLO_DEBUG");
    unsetenv("KOLO_DEBUG_SUBSYS");
    kolo::log::reset_for_tests();
    std::filesystem::remove_all(dir_);
  }
  std::string file_name() const {
    char host[256] = "";
    ::gethostname(host, sizeof host);
    return dir_.string() + "/log." + host + "." + std::to_string(::getpid()) + ".pid" + std::to_string(::getpid()) + ".txt";
  }
  std::string contents() const {
    std::ifstream f(file_name());
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  std::filesystem::path dir_;
};

TEST_F(LogTest, LinesCarryTimeHostPidTidRankLevelAndSubsystem) {
  setenv("KOLO_DEBUG", "INFO", 1);
  kolo::log::reset_for_tests();
  KOLO_LOG_AT(info, Subsys::net, "hello " << 42);
  const std::string text = contents();
  ASSERT_FALSE(text.empty()) << "nothing in " << file_name() << " (the name expands %h, %p, %r)";
  const std::regex line(R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z [^ :]+:(\d+):(\d+) kolo\[pid (\d+)\] INFO NET hello 42\n$)");
  std::smatch m;
  ASSERT_TRUE(std::regex_match(text, m, line)) << text;
  EXPECT_EQ(m[1].str(), std::to_string(::getpid()));
  EXPECT_EQ(m[3].str(), std::to_string(::getpid()));
}

TEST_F(LogTest, SubsystemFilterKeepsWarningsAndDropsExcludedChatter) {
  setenv("KOLO_DEBUG", "DEBUG", 1);
  setenv("KOLO_DEBUG_SUBSYS", "^NET,shm", 1);
  kolo::log::reset_for_tests();
  KOLO_LOG_AT(info, Subsys::net, "net info");
  KOLO_LOG_AT(debug, Subsys::shm, "shm debug");
  KOLO_LOG_AT(warn, Subsys::net, "net warning");
  KOLO_LOG_AT(info, Subsys::coll, "coll info");
  KOLO_LOG_AT(trace, Subsys::coll, "coll trace");  // above the level
  const std::string text = contents();
  EXPECT_EQ(text.find("net info"), std::string::npos) << text;
  EXPECT_EQ(text.find("shm debug"), std::string::npos) << text;
  EXPECT_NE(text.find("WARN NET net warning"), std::string::npos) << text;
  EXPECT_NE(text.find("INFO COLL coll info"), std::string::npos) << text;
  EXPECT_EQ(text.find("coll trace"), std::string::npos) << text;
}

TEST_F(LogTest, SubsystemListSelectsOnlyThose) {
  setenv("KOLO_DEBUG", "INFO", 1);
  setenv("KOLO_DEBUG_SUBSYS", "INIT,STORE", 1);
  kolo::log::reset_for_tests();
  KOLO_LOG_AT(info, Subsys::init, "init line");
  KOLO_LOG_AT(info, Subsys::store, "store line");
  KOLO_LOG_AT(info, Subsys::coll, "coll line");
  const std::string text = contents();
  EXPECT_NE(text.find("INFO INIT init line"), std::string::npos) << text;
  EXPECT_NE(text.find("INFO STORE store line"), std::string::npos) << text;
  EXPECT_EQ(text.find("coll line"), std::string::npos) << text;
}

}  // namespace
