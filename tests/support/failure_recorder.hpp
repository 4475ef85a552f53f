// A FailureSink for transport tests: keeps the first failure reported (peer, why, detail) and
// counts every report, so a test can check both who was blamed and that it was said once.
#pragma once
#include <mutex>
#include <string>

#include "transports/transport.hpp"

namespace kolo::testing {

struct FailureRecorder : transport::FailureSink {
  std::mutex mu;
  int peer = -1;
  transport::Failure why = transport::Failure::none;
  std::string detail;
  int reports = 0;
  void peer_failed(int p, transport::Failure w, const std::string& d) override {
    std::lock_guard<std::mutex> lk(mu);
    ++reports;
    if (why != transport::Failure::none) return;
    peer = p;
    why = w;
    detail = d;
  }
};

}  // namespace kolo::testing
