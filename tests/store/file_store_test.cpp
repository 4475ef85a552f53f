// FileStore across processes: atomic adds from forked children, wake-ups across processes,
// stores inherited through fork(), and removal of the file once world_size users are done.
#include <gtest/gtest.h>

#include <filesystem>
#include <future>

#include "kolo/error.hpp"
#include "kolo/store.hpp"
#include "store_test_util.hpp"

namespace kolo {
namespace {

using namespace store_test;

TEST(FileStore, ForkedProcessesAddAtomically) {
  ScratchDir dir;
  const std::string path = dir.file("store");
  constexpr int kChildren = 4;
  constexpr int kAdds = 100;
  std::vector<pid_t> children;
  for (int c = 0; c < kChildren; ++c) {
    children.push_back(fork_child([&, c] {
      auto store = make_file_store(path);
      for (int i = 0; i < kAdds; ++i) store->add("counter", c + 1);
      return true;
    }));
  }
  for (pid_t pid : children) EXPECT_EQ(wait_child(pid), 0);
  // Child c adds c+1 each time: 100 * (1 + 2 + 3 + 4).
  int64_t expected = 0;
  for (int c = 0; c < kChildren; ++c) expected += int64_t(kAdds) * (c + 1);
  EXPECT_EQ(make_file_store(path)->add("counter", 0), expected);
}

TEST(FileStore, WaitWakesWhenAnotherProcessSetsTheKey) {
  ScratchDir dir;
  const std::string path = dir.file("store");
  auto store = make_file_store(path);
  pid_t child = fork_child([&] {
    auto mine = make_file_store(path);
    std::this_thread::sleep_for(Ms(100));
    mine->set("from-child", std::string("hello"));
    return true;
  });
  store->set_timeout(Ms(5000));
  Stopwatch clock;
  EXPECT_EQ(store->get_string("from-child"), "hello");
  EXPECT_LT(clock.elapsed(), Ms(3000));
  EXPECT_EQ(wait_child(child), 0);
}

TEST(FileStore, StoreInheritedThroughForkStillLocksCorrectly) {
  ScratchDir dir;
  auto store = make_file_store(dir.file("store"));
  store->set("ready", std::string("1"));  // the parent has used (and locked) the file before fork
  constexpr int kAdds = 1000;
  int start[2];
  ASSERT_EQ(::pipe(start), 0);
  pid_t child = fork_child([&] {
    char go;
    if (::read(start[0], &go, 1) != 1) return false;
    for (int i = 0; i < kAdds; ++i) store->add("counter", 1);
    return true;
  });
  // Both processes add at the same time, so shared locking would lose updates.
  ASSERT_EQ(::write(start[1], "g", 1), 1);
  for (int i = 0; i < kAdds; ++i) store->add("counter", 1);
  ASSERT_EQ(wait_child(child), 0);
  ::close(start[0]);
  ::close(start[1]);
  EXPECT_EQ(store->add("counter", 0), 2 * kAdds);
}

TEST(FileStore, FileIsRemovedWhenAllWorldSizeUsersAreDone) {
  ScratchDir dir;
  const std::string path = dir.file("store");
  auto first = make_file_store(path, 3);
  auto second = make_file_store(path, 3);
  first->set("k", std::string("v"));
  pid_t child = fork_child([&] {
    auto third = make_file_store(path, 3);
    return third->get_string("k") == "v";
  });
  ASSERT_EQ(wait_child(child), 0);
  EXPECT_TRUE(std::filesystem::exists(path)) << "removed after 1 of 3 users finished";
  first.reset();
  EXPECT_TRUE(std::filesystem::exists(path)) << "removed after 2 of 3 users finished";
  EXPECT_EQ(second->get_string("k"), "v");
  second.reset();
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(FileStore, ForkedCopyDoesNotCountAsAUser) {
  ScratchDir dir;
  const std::string path = dir.file("store");
  auto store = make_file_store(path, 1);
  pid_t child = fork_child([&] {
    store->set("child", std::string("was here"));
    store.reset();  // the parent's object, copied by fork: not a user of its own
    return true;
  });
  ASSERT_EQ(wait_child(child), 0);
  EXPECT_TRUE(std::filesystem::exists(path));
  EXPECT_EQ(store->get_string("child"), "was here");
  store.reset();
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(FileStore, WithoutWorldSizeTheFileStays) {
  ScratchDir dir;
  const std::string path = dir.file("store");
  make_file_store(path)->set("k", std::string("v"));
  EXPECT_TRUE(std::filesystem::exists(path));
  EXPECT_EQ(make_file_store(path)->get_string("k"), "v");
}

TEST(FileStore, UnopenablePathIsAnError) {
  ScratchDir dir;
  try {
    make_file_store(dir.file("no-such-dir/store"));
    FAIL() << "opened a file in a missing directory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-dir"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_file_store(""), InvalidArgument);
}

}  // namespace
}  // namespace kolo
