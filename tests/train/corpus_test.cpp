// The corpus: byte tokens, the train/validation cut, sample windows, and the default King James
// Bible when the bible-kjv package is installed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "corpus.hpp"
#include "kolo/error.hpp"

namespace kolo::train {
namespace {

TEST(Corpus, SplitKeepsTheLastFractionForValidation) {
  std::string text;
  for (int i = 0; i < 1000; ++i) text.push_back(static_cast<char>('a' + i % 26));
  TokenSplit split = split_tokens(text, 0.1, 8);
  EXPECT_EQ(split.train.size(), 900u);
  EXPECT_EQ(split.validation.size(), 100u);
  EXPECT_EQ(split.validation.front(), static_cast<uint8_t>(text[900]));
  EXPECT_THROW(split_tokens("short", 0.1, 8), InvalidArgument);
}

TEST(Corpus, WindowsAreShiftedPairsAtMultiplesOfSeq) {
  std::vector<uint8_t> tokens;
  for (int i = 0; i < 23; ++i) tokens.push_back(static_cast<uint8_t>(200 + i));
  TokenWindows windows(tokens, 5);
  EXPECT_EQ(windows.count(), 4u);  // (23 - 1) / 5: every window needs one extra target token
  std::vector<int> x, y;
  windows.append(2, x, y);
  EXPECT_EQ(x, (std::vector<int>{210, 211, 212, 213, 214}));
  EXPECT_EQ(y, (std::vector<int>{211, 212, 213, 214, 215}));
  windows.append(3, x, y);
  EXPECT_EQ(y.back(), 220);  // the last window ends one token before the end
  EXPECT_THROW(windows.append(4, x, y), InvalidArgument);
}

TEST(Corpus, ReadsFilesAsRawBytes) {
  const auto path = std::filesystem::temp_directory_path() / ("kolo-corpus-" + std::to_string(::getpid()));
  const std::string bytes("abc\n\xff\0z", 7);  // any byte, NUL included
  std::ofstream(path, std::ios::binary) << bytes;
  EXPECT_EQ(load_corpus(path.string()), bytes);
  EXPECT_NE(corpus_fingerprint(bytes), corpus_fingerprint("abc"));
  std::filesystem::remove(path);
  EXPECT_THROW(load_corpus(path.string()), InvalidArgument);
}

TEST(Corpus, DefaultIsTheKingJamesBible) {
  if (std::system("command -v bible >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "bible-kjv is not installed (scripts/build/install-deps.sh installs it)";
  const std::string text = load_corpus(kKjvCorpus);
  EXPECT_EQ(text.rfind("In the beginning God created the heaven and the earth.\n", 0), 0u) << text.substr(0, 80);
  EXPECT_GT(text.size(), 4'000'000u);
  const std::string last = "The grace of our Lord Jesus Christ be with you all. Amen.\n";
  EXPECT_EQ(text.substr(text.size() - last.size()), last);
  EXPECT_EQ(text.find("Ge1:"), std::string::npos);  // references stripped
}

}  // namespace
}  // namespace kolo::train
