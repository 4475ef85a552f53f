// The harness's device-memory path (kolo-perf -g 1) without a GPU: a DeviceMemory whose "device"
// is separate host memory, and a one-rank backend that runs the collective on the pointers it
// is given. Proves that the backend only ever sees device pointers, that -c fills the device
// buffers from the host values and checks what comes back (a device that drops the copies is
// caught: exit 7), and that the rank lines and --json name the GPU.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>

#include "harness.hpp"
#include "report.hpp"
#include "usage_error.hpp"

namespace kolo::bench {
namespace {

class FakeDevice final : public DeviceMemory {
 public:
  explicit FakeDevice(bool drop_copies) : drop_copies_(drop_copies) {
    info_ = {3, "Fake GPU", "0000:1B:00.0", "0000:1b:00"};
  }
  ~FakeDevice() override { EXPECT_TRUE(live_.empty()) << "device buffers not released"; }
  const DeviceInfo& info() const override { return info_; }
  void* stream() const override { return reinterpret_cast<void*>(0x5); }
  void* allocate(size_t bytes) override {
    char* p = static_cast<char*>(std::calloc(bytes, 1));
    live_.insert(p);
    sizes_[p] = bytes;
    return p;
  }
  void release(void* p) override {
    live_.erase(static_cast<char*>(p));
    std::free(p);
  }
  void to_device(void* device, const void* host, size_t bytes) override {
    EXPECT_TRUE(owns(device, bytes));
    if (!drop_copies_) std::memcpy(device, host, bytes);
  }
  void to_host(void* host, const void* device, size_t bytes) override {
    EXPECT_TRUE(owns(device, bytes));
    std::memcpy(host, device, bytes);
  }
  void synchronize_stream() override {}
  // Whether [p, p + bytes) lies in one of this device's buffers.
  bool owns(const void* p, size_t bytes) const {
    const char* c = static_cast<const char*>(p);
    for (char* base : live_) {
      if (c >= base && c + bytes <= base + sizes_.at(base)) return true;
    }
    return false;
  }

 private:
  bool drop_copies_;
  DeviceInfo info_;
  std::set<char*> live_;
  std::map<char*, size_t> sizes_;
};

// One rank: an all-reduce is a copy of the input to the output (memmove: in place they are one).
class OneRank final : public Backend {
 public:
  explicit OneRank(const FakeDevice& device) : device_(device) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string library() const override { return "fake"; }
  void barrier() override {}
  double reduce_double(double value, Combine) override { return value; }
  std::vector<char> allgather_bytes(const std::vector<char>& mine) override { return mine; }
  std::unique_ptr<PreparedRun> prepare(const RunRequest& r) override {
    EXPECT_TRUE(device_.owns(r.where.send, r.where.send_count * 4)) << "send is not device memory";
    EXPECT_TRUE(device_.owns(r.where.recv, r.where.recv_count * 4)) << "recv is not device memory";
    const Placement w = r.where;
    return blocking_run([w] { std::memmove(w.recv, w.send, w.recv_count * 4); });
  }

 private:
  const FakeDevice& device_;
};

SweepOptions options(const std::string& json) {
  SweepOptions o;
  o.collective = "allreduce";
  o.min_bytes = 8;
  o.max_bytes = 4096;
  o.step_factor = 8;
  o.iters = 2;
  o.unalign = 1;  // the device pointers keep the host's offsets
  o.json_path = json;
  return o;
}

TEST(HarnessDevice, ChecksWhatTheDeviceHoldsAndNamesTheGpu) {
  const std::string json = ::testing::TempDir() + "harness_device.json";
  FakeDevice device(false);
  OneRank backend(device);
  SweepOptions o = options(json);
  const std::string nccl = ::testing::TempDir() + "harness_device_nccl.json";
  std::remove(nccl.c_str());
  o.output_file = nccl;  // -J: nccl-tests' document names the GPU as nccl-tests does
  EXPECT_EQ(run_benchmark(backend, o, "kolo-perf", "[fake]", &device), kExitOk);
  const auto read = [](const std::string& path) {
    std::ifstream f(path);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  };
  const std::string doc = read(nccl);
  EXPECT_NE(doc.find("\"device\":3,\"device_hex\":\"0000:1b:00\",\"device_info\":\"Fake GPU\""), std::string::npos);
  std::remove(nccl.c_str());
  const std::string text = read(json);
  EXPECT_NE(text.find("\"memory\": \"device\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"bus_id\": \"0000:1B:00.0\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"name\": \"Fake GPU\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"wrong\":0"), std::string::npos) << text;
  std::remove(json.c_str());
}

TEST(HarnessDevice, ADeviceThatNeverGetsTheInputsFailsTheCheck) {
  const std::string json = ::testing::TempDir() + "harness_device_dropped.json";
  FakeDevice device(true);
  OneRank backend(device);
  const SweepOptions o = options(json);
  EXPECT_EQ(run_benchmark(backend, o, "kolo-perf", "[fake]", &device), kExitTestFailure);
  std::remove(json.c_str());
}

}  // namespace
}  // namespace kolo::bench
