#include "transports/shm/shm_segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <utility>

#include "kolo/error.hpp"

namespace kolo::shm {

namespace {

std::string path_of(const std::string& name) { return std::string(kShmDir) + name; }

std::string human_bytes(size_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

[[noreturn]] void throw_too_big(const std::string& name, size_t bytes, const std::string& why) {
  throw Error("shm transport: cannot reserve " + std::to_string(bytes) + " bytes (" + human_bytes(bytes) +
              ") for the shared-memory segment " + path_of(name) + ": " + why +
              ". Enlarge " + kShmDir + " (e.g. docker run --shm-size), lower KOLO_SHM_SLOTS or KOLO_SHM_SLOT_BYTES, "
              "or set KOLO_TRANSPORT=tcp");
}

}  // namespace

Segment::Segment(Segment&& o) noexcept
    : name_(std::move(o.name_)), base_(std::exchange(o.base_, nullptr)), bytes_(std::exchange(o.bytes_, 0)),
      linked_(std::exchange(o.linked_, false)) {}

Segment& Segment::operator=(Segment&& o) noexcept {
  if (this != &o) {
    release();
    name_ = std::move(o.name_);
    base_ = std::exchange(o.base_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    linked_ = std::exchange(o.linked_, false);
  }
  return *this;
}

Segment::~Segment() { release(); }

void Segment::release() {
  if (base_) ::munmap(base_, bytes_);
  base_ = nullptr;
  bytes_ = 0;
  unlink();
}

void Segment::unlink() {
  if (!linked_) return;
  ::shm_unlink(name_.c_str());
  linked_ = false;
}

Segment Segment::create(const std::string& name, size_t bytes) {
  int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return Segment();
    throw Error("shm transport: cannot create the shared-memory segment " + path_of(name) + ": " + std::strerror(errno));
  }
  Segment s;
  s.name_ = name;
  s.linked_ = true;  // from here on, a failure below removes the name again
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};

  // Ask first: reserving more than the file system holds would fill it (and memory) for nothing.
  struct statvfs fs {};
  if (::fstatvfs(fd, &fs) == 0) {
    unsigned long long avail = static_cast<unsigned long long>(fs.f_bavail) * fs.f_frsize;
    if (bytes > avail)
      throw_too_big(name, bytes, std::string(kShmDir) + " has only " + std::to_string(avail) + " bytes (" +
                                     human_bytes(static_cast<size_t>(avail)) + ") free");
  }
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) throw_too_big(name, bytes, std::string("ftruncate: ") + std::strerror(errno));
  // tmpfs allocates pages lazily; a page it cannot find later would kill us with SIGBUS on first
  // touch. Reserving them now turns a full /dev/shm into this error instead.
  int err = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (err != 0 && err != EOPNOTSUPP && err != EINVAL)
    throw_too_big(name, bytes, std::string("posix_fallocate: ") + std::strerror(err));
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) throw_too_big(name, bytes, std::string("mmap: ") + std::strerror(errno));
  s.base_ = static_cast<char*>(p);
  s.bytes_ = bytes;
  return s;
}

Segment Segment::open(const std::string& name, const std::string& whose) {
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) {
    int e = errno;
    std::string hint = e == ENOENT   ? " (is that rank in another container or IPC namespace?)"
                       : e == EACCES ? " (do the ranks run as different users?)"
                                     : "";
    throw Error("shm transport: cannot open " + whose + "'s shared-memory segment " + path_of(name) + ": " +
                std::strerror(e) + hint);
  }
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw Error("shm transport: fstat " + path_of(name) + ": " + std::strerror(errno));
  size_t bytes = static_cast<size_t>(st.st_size);
  if (bytes == 0) throw Error("shm transport: " + whose + "'s shared-memory segment " + path_of(name) + " is empty");
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED)
    throw Error("shm transport: cannot map " + whose + "'s shared-memory segment " + path_of(name) + " (" +
                std::to_string(bytes) + " bytes): " + std::strerror(errno));
  Segment s;
  s.name_ = name;
  s.base_ = static_cast<char*>(p);
  s.bytes_ = bytes;
  return s;
}

void prefault(char* begin, size_t bytes) {
#ifndef MADV_POPULATE_WRITE
  constexpr int MADV_POPULATE_WRITE = 23;  // <linux/mman.h>, Linux 5.14
#endif
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = reinterpret_cast<uintptr_t>(begin) & ~(page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(begin) + bytes;
  if (bytes == 0) return;
  if (::madvise(reinterpret_cast<void*>(first), end - first, MADV_POPULATE_WRITE) == 0) return;
  // Older kernels: a read maps the page (writable: the mapping is shared and writable). The
  // peer may be writing these bytes: a plain read of them could race, an atomic load not.
  for (uintptr_t a = first; a < end; a += page) (void)__atomic_load_n(reinterpret_cast<const char*>(a), __ATOMIC_RELAXED);
}

}  // namespace kolo::shm
