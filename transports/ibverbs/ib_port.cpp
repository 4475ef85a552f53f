#include "transports/ibverbs/ib_port.hpp"

#include <arpa/inet.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "common/log.hpp"
#include "common/config.hpp"
#include "kolo/error.hpp"

namespace kolo::ib {

namespace {

bool is_zero(const ibv_gid& g) {
  for (uint8_t b : g.raw)
    if (b) return false;
  return true;
}

// ::ffff:a.b.c.d
bool is_ipv4_mapped(const ibv_gid& g) {
  for (int i = 0; i < 10; ++i)
    if (g.raw[i]) return false;
  return g.raw[10] == 0xff && g.raw[11] == 0xff;
}

std::string gid_text(const ibv_gid& g) {
  char buf[INET6_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET6, g.raw, buf, sizeof buf);
  return buf;
}

// "IB/RoCE v1" or "RoCE v2", from sysfs; empty when the kernel does not say.
std::string gid_type(const std::string& dev, int port, int index) {
  std::ifstream f("/sys/class/infiniband/" + dev + "/ports/" + std::to_string(port) + "/gid_attrs/types/" +
                  std::to_string(index));
  std::string line;
  std::getline(f, line);
  return line;
}

const char* port_state_text(ibv_port_state s) { return ibv_port_state_str(s); }

// Picks the GID on a RoCE port: RoCE v2 with an IPv4-mapped address first, then any RoCE v2,
// then any non-zero GID. -1 if the table is empty.
int pick_roce_gid(ibv_context* ctx, const std::string& dev, int port, int table_len) {
  int v2 = -1, any = -1;
  for (int i = 0; i < table_len; ++i) {
    ibv_gid g{};
    if (ibv_query_gid(ctx, static_cast<uint8_t>(port), i, &g) != 0 || is_zero(g)) continue;
    const bool roce_v2 = gid_type(dev, port, i) == "RoCE v2";
    if (roce_v2 && is_ipv4_mapped(g)) return i;
    if (roce_v2 && v2 < 0) v2 = i;
    if (any < 0) any = i;
  }
  return v2 >= 0 ? v2 : any;
}

struct HcaRequest {
  std::string name;  // empty: any
  int port = 0;      // 0: any
};

HcaRequest requested_hca() {
  HcaRequest r;
  std::string v = config::get_string("KOLO_IB_HCA");
  auto colon = v.find(':');
  r.name = v.substr(0, colon);
  if (colon != std::string::npos) {
    char* end = nullptr;
    long p = std::strtol(v.c_str() + colon + 1, &end, 10);
    if (end == v.c_str() + colon + 1 || *end != '\0' || p < 1 || p > 255)
      throw InvalidArgument("KOLO_IB_HCA='" + v + "': the port after ':' must be a number from 1 to 255");
    r.port = static_cast<int>(p);
  }
  return r;
}

// Fills `out` from an ACTIVE port, or says why the port does not do.
std::string try_port(ibv_context* ctx, const std::string& dev, int port, PortChoice* out) {
  ibv_port_attr pa{};
  if (int rc = ibv_query_port(ctx, static_cast<uint8_t>(port), &pa); rc != 0)
    return verbs_error("ibv_query_port", rc);
  if (pa.state != IBV_PORT_ACTIVE) return std::string("port state ") + port_state_text(pa.state);
  PortChoice c;
  c.device = dev;
  c.port = static_cast<uint8_t>(port);
  c.roce = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
  c.lid = pa.lid;
  c.mtu = pa.active_mtu;
  if (config::is_set("KOLO_IB_GID_INDEX")) {
    int64_t i = config::get_int("KOLO_IB_GID_INDEX");
    if (i < 0 || i >= pa.gid_tbl_len)
      throw InvalidArgument("KOLO_IB_GID_INDEX=" + std::to_string(i) + " is outside the GID table of " + dev +
                            " port " + std::to_string(port) + " (" + std::to_string(pa.gid_tbl_len) + " entries)");
    c.gid_index = static_cast<int>(i);
  } else if (c.roce) {
    c.gid_index = pick_roce_gid(ctx, dev, port, pa.gid_tbl_len);
    if (c.gid_index < 0) return "RoCE port without any GID (no IP address on its network device?)";
  }
  if (c.gid_index >= 0) {
    if (int rc = ibv_query_gid(ctx, c.port, c.gid_index, &c.gid); rc != 0) return verbs_error("ibv_query_gid", rc);
    if (is_zero(c.gid)) return "GID index " + std::to_string(c.gid_index) + " is empty";
  }
  if (!c.roce && c.lid == 0 && c.gid_index < 0) return "InfiniBand port without a LID (is a subnet manager running?)";
  *out = c;
  return "";
}

}  // namespace

std::string PortChoice::describe() const {
  std::string s = device + " port " + std::to_string(port) + (roce ? ", RoCE" : ", InfiniBand");
  if (gid_index >= 0) s += ", GID index " + std::to_string(gid_index) + " (" + gid_text(gid) + ")";
  if (!roce) s += ", LID " + std::to_string(lid);
  return s + ", MTU " + std::to_string(128 << static_cast<int>(mtu));
}

OpenPort open_port() {
  const HcaRequest want = requested_hca();
  int n = 0;
  errno = 0;
  DeviceListPtr list(ibv_get_device_list(&n));
  if (!list) throw_verbs_error("ibv_get_device_list", errno, " (no RDMA support in this kernel, or no RDMA device)");
  if (n == 0) throw Error("ibverbs transport: no RDMA device found (ibv_devinfo lists none; for Soft-RoCE: rdma link add rxe0 type rxe netdev <dev>)");
  std::string tried;
  for (int d = 0; d < n; ++d) {
    const std::string name = ibv_get_device_name(list.get()[d]);
    if (!want.name.empty() && name != want.name) continue;
    errno = 0;
    ContextPtr ctx(ibv_open_device(list.get()[d]));
    if (!ctx) {
      tried += "; " + name + ": " + verbs_error("ibv_open_device", errno);
      continue;
    }
    ibv_device_attr da{};
    if (int rc = ibv_query_device(ctx.get(), &da); rc != 0) {
      tried += "; " + name + ": " + verbs_error("ibv_query_device", rc);
      continue;
    }
    for (int p = 1; p <= da.phys_port_cnt; ++p) {
      if (want.port && p != want.port) continue;
      OpenPort out;
      std::string why = try_port(ctx.get(), name, p, &out.choice);
      if (why.empty()) {
        out.ctx = std::move(ctx);
        return out;
      }
      tried += "; " + name + " port " + std::to_string(p) + ": " + why;
    }
  }
  if (tried.empty())
    throw Error("ibverbs transport: KOLO_IB_HCA='" + config::get_string("KOLO_IB_HCA") + "' names no port of this host's RDMA devices");
  throw Error("ibverbs transport: no usable RDMA port: " + tried.substr(2));
}

const std::string& port_problem() {
  static const std::string problem = [] {
    try {
      OpenPort p = open_port();
      KOLO_LOG(debug, "ibverbs: usable port " << p.choice.describe());
      return std::string();
    } catch (const std::exception& e) {
      KOLO_LOG(debug, "ibverbs: " << e.what());
      return std::string(e.what());
    }
  }();
  return problem;
}

bool gpudirect_module_loaded() {
  struct stat st {};
  return ::stat("/sys/module/nvidia_peermem", &st) == 0 || ::stat("/sys/module/nv_peer_mem", &st) == 0;
}

}  // namespace kolo::ib
