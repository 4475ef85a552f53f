#include "transports/device_collectives.hpp"

namespace kolo::transport {

namespace {
DeviceCollectivesMaker& maker() {
  static DeviceCollectivesMaker m = nullptr;
  return m;
}
}  // namespace

DeviceCollectivesRegistration::DeviceCollectivesRegistration(DeviceCollectivesMaker make) { maker() = make; }

bool device_collectives_built() { return maker() != nullptr; }

std::unique_ptr<DeviceCollectives> make_device_collectives(std::shared_ptr<Store> store, int rank, int world,
                                                           const DeviceCollectivesOptions& opts) {
  if (maker() == nullptr) return nullptr;
  return maker()(std::move(store), rank, world, opts);
}

}  // namespace kolo::transport
