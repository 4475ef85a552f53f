#include "kolorun/tagged_stream.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace kolo::launcher {

TaggedStream::TaggedStream(UniqueFd source, int rank, int destination)
    : source_(std::move(source)), destination_(destination) {
  // snprintf rather than string concatenation, on which GCC 12 warns falsely (-Wrestrict).
  char prefix[32];
  std::snprintf(prefix, sizeof prefix, "[%d]: ", rank);
  prefix_ = prefix;
}

void TaggedStream::on_readable() {
  char buffer[16 * 1024];
  // Bounded number of reads per wakeup so one chatty rank cannot starve the others.
  for (int round = 0; round < 16 && source_.valid(); ++round) {
    ssize_t n = ::read(source_.get(), buffer, sizeof buffer);
    if (n > 0) {
      pending_.append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    finish();  // EOF, or an error that makes the pipe unusable
    return;
  }
  emit_complete_lines();
}

void TaggedStream::finish() {
  emit_complete_lines();
  if (!pending_.empty()) {
    std::string text = prefix_ + pending_ + "\n";
    emit(text);
    pending_.clear();
  }
  source_.reset();
}

void TaggedStream::emit_complete_lines() {
  std::string out;
  size_t start = 0;
  for (;;) {
    size_t newline = pending_.find('\n', start);
    size_t line_end = newline == std::string::npos ? std::string::npos : newline + 1;
    if (line_end == std::string::npos) {
      if (pending_.size() - start < kMaxLineBytes) break;
      // Over-long unfinished line: emit a piece now, as its own tagged line.
      out += prefix_;
      out.append(pending_, start, kMaxLineBytes);
      out += '\n';
      start += kMaxLineBytes;
      continue;
    }
    out += prefix_;
    out.append(pending_, start, line_end - start);
    start = line_end;
  }
  pending_.erase(0, start);
  if (!out.empty()) emit(out);
}

void TaggedStream::emit(std::string_view text) {
  if (destination_broken_) return;
  if (!write_all(destination_, text)) destination_broken_ = true;
}

}  // namespace kolo::launcher
