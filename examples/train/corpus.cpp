#include "corpus.hpp"

#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>

#include "kolo/error.hpp"

namespace kolo::train {
namespace {

// `bible -f` prints one verse per line, each starting with its reference ("Ge1:1 In the ...").
// stdin is /dev/null so that bible never waits for interactive commands.
constexpr const char* kBibleCommand = "bible -f gen1:1-rev22:21 </dev/null 2>/dev/null";

std::string strip_verse_references(const std::string& raw) {
  std::string text;
  text.reserve(raw.size());
  std::istringstream lines(raw);
  std::string line;
  while (std::getline(lines, line)) {
    size_t space = line.find(' ');
    text.append(space == std::string::npos ? line : line.substr(space + 1));
    text.push_back('\n');
  }
  return text;
}

std::string read_kjv() {
  FILE* pipe = ::popen(kBibleCommand, "r");
  if (pipe == nullptr) throw InvalidArgument("--data kjv: cannot run `bible`");
  std::string raw;
  char chunk[1 << 16];
  size_t got = 0;
  while ((got = std::fread(chunk, 1, sizeof chunk, pipe)) > 0) raw.append(chunk, got);
  int status = ::pclose(pipe);
  // The whole Bible is about 4.4 MB; anything much shorter means bible is missing or broken.
  if (status != 0 || raw.size() < 1000000)
    throw InvalidArgument(
        "--data kjv: the King James Bible is not available (`bible` failed); install it with "
        "`apt-get install bible-kjv bible-kjv-text` (scripts/build/install-deps.sh does), or pass --data FILE");
  return strip_verse_references(raw);
}

}  // namespace

std::string load_corpus(const std::string& source) {
  if (source == kKjvCorpus) return read_kjv();
  std::ifstream in(source, std::ios::binary);
  if (!in) throw InvalidArgument("--data " + source + ": cannot open the file");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.empty()) throw InvalidArgument("--data " + source + ": the file is empty");
  return text;
}

TokenSplit split_tokens(const std::string& text, double validation_fraction, int seq) {
  if (!(validation_fraction > 0 && validation_fraction < 1))
    throw InvalidArgument("the validation fraction must lie strictly between 0 and 1");
  const size_t window = static_cast<size_t>(seq) + 1;
  size_t validation = static_cast<size_t>(static_cast<double>(text.size()) * validation_fraction);
  if (validation < window) validation = window;
  if (text.size() < validation + window)
    throw InvalidArgument("the corpus has " + std::to_string(text.size()) + " bytes: too short for windows of " +
                          std::to_string(window) + " tokens in both the training and the validation part");
  TokenSplit split;
  const size_t cut = text.size() - validation;
  split.train.assign(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(cut));
  split.validation.assign(text.begin() + static_cast<std::ptrdiff_t>(cut), text.end());
  return split;
}

TokenWindows::TokenWindows(const std::vector<uint8_t>& tokens, int seq)
    : tokens_(&tokens), seq_(seq), count_(tokens.size() > 1 ? (tokens.size() - 1) / static_cast<size_t>(seq) : 0) {}

void TokenWindows::append(size_t index, std::vector<int>& inputs, std::vector<int>& targets) const {
  if (index >= count_) throw InvalidArgument("window " + std::to_string(index) + " out of range");
  const uint8_t* start = tokens_->data() + index * static_cast<size_t>(seq_);
  for (int t = 0; t < seq_; ++t) {
    inputs.push_back(start[t]);
    targets.push_back(start[t + 1]);
  }
}

uint64_t corpus_fingerprint(const std::string& text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : text) hash = (hash ^ c) * 0x100000001b3ull;
  return hash;
}

}  // namespace kolo::train
