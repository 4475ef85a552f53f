// The training text, as byte-level tokens (token = byte value, so the vocabulary is 256), split
// into a training part and a validation part, and cut into fixed-length sample windows.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kolo::train {

// The --data value that means "the King James Bible from Debian's bible-kjv package".
inline constexpr const char* kKjvCorpus = "kjv";

// Reads the corpus named by `source`: kKjvCorpus runs `bible` (packages bible-kjv and
// bible-kjv-text) and keeps the verse text without the "Ge1:1 " references; anything else is a
// file path read as raw bytes. Throws kolo::InvalidArgument naming the source and what to do.
std::string load_corpus(const std::string& source);

struct TokenSplit {
  std::vector<uint8_t> train;
  std::vector<uint8_t> validation;
};
// The last `validation_fraction` of the text (at least one window's worth when possible) is
// the validation set; the split is a plain cut, so no window straddles the two.
TokenSplit split_tokens(const std::string& text, double validation_fraction, int seq);

// Non-overlapping windows of seq+1 tokens starting at multiples of seq: window i gives the
// inputs tokens[i*seq, i*seq+seq) and the targets shifted by one.
class TokenWindows {
 public:
  TokenWindows(const std::vector<uint8_t>& tokens, int seq);
  size_t count() const { return count_; }
  // Appends window `index`'s inputs and targets (seq tokens each).
  void append(size_t index, std::vector<int>& inputs, std::vector<int>& targets) const;

 private:
  const std::vector<uint8_t>* tokens_;
  int seq_;
  size_t count_;
};

// A 64-bit FNV-1a hash of the text; checkpoints record it so that resuming on another corpus
// is refused.
uint64_t corpus_fingerprint(const std::string& text);

}  // namespace kolo::train
