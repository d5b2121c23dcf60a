// akachannel.h - the channel between the scorer's trusted driver and a candidate worker
// (docs/scoring.md, "Driver and worker"). The driver owns the clock, the inputs and the choice
// of which outputs to verify; the worker is the candidate's kernel behind a thin loader.
//
// Two parts:
//  - a Unix stream socket (the driver listens, the worker connects) for set-up messages: each a
//    little-endian u32 length and that many bytes of JSON, at most kMaxMessage; a file
//    descriptor may ride along (SCM_RIGHTS);
//  - one shared memory region per configuration (a sealed memfd the driver makes and passes):
//    a header page with the go/done words, then the input and output tensors.
//
// A call: the driver writes the inputs into the region, sets `cmd`, stores the call's number in
// `go` and wakes it; the worker runs the kernel on the region's tensors, stores the same number
// in `done` and wakes that. Both words are futexes on shared memory, so either side may sleep
// or spin on them. Nothing in the region is trusted by the driver but `done` (and only as "the
// worker says it is finished": the output is read and verified anyway).
//
// Header-only and C++17 like the rest of the cpp harness: it is copied into every workspace.
#pragma once

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <linux/futex.h>
#include <poll.h>
#include <stdexcept>
#include <string>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

namespace akachan {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

constexpr uint32_t kMagic = 0x31434b41;  // "AKC1"
constexpr uint32_t kVersion = 2;
constexpr size_t kHeaderBytes = 4096;
constexpr size_t kTensorAlign = 4096;
constexpr uint32_t kMaxMessage = 1u << 20;

enum Command : uint32_t {
  kCall = 1,      // run the kernel once on the region's tensors
  kEmpty = 2,     // do nothing (the driver calibrates its own overhead; only the trusted baseline gets these)
  kEndGroup = 3,  // the configuration is done: go back to the socket for the next message
  kPrime = 4,     // GPU harnesses: run an empty kernel and synchronise, untimed, so that the GPU holds
                  // the worker's context when the driver's clock starts (docs/scoring.md)
};

enum WorkerStatus : uint32_t { kOk = 0, kFailed = 1 };

// Header::window: this call opens a window (its pool's descriptor follows on the socket) and/or
// closes it (the worker unmaps the pool after done). kWindowQueued (GPU harnesses): the worker
// says done as soon as the call is launched and synchronises its device only at the window's
// last call, so the window's calls run back to back on the GPU (docs/scoring.md "GPU harnesses").
enum WindowFlags : uint32_t { kWindowOpen = 1, kWindowClose = 2, kWindowQueued = 4 };

// The region's first page. go and done sit on cache lines of their own so that the side that
// spins on one does not slow the side that writes the other.
struct Header {
  uint32_t magic;
  uint32_t version;
  alignas(64) std::atomic<uint32_t> go;
  uint32_t cmd;
  // GPU harnesses, several calls to a window (docs/scoring.md "GPU harnesses"): the input set
  // of the window's pool this call uses, the output set it writes, and kWindowOpen/kWindowClose.
  uint32_t slot;
  uint32_t outSet;
  uint32_t window;
  alignas(64) std::atomic<uint32_t> done;
  uint32_t status;        // WorkerStatus of the call that `done` names
  uint64_t inprocNs;      // the worker's own clock around the kernel: a second opinion, never trusted
};
static_assert(sizeof(Header) <= kHeaderBytes, "the header must fit its page");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "futex words must be plain 32-bit words");

inline std::string errnoText() { return std::strerror(errno); }

inline uint32_t* futexWord(std::atomic<uint32_t>& a) { return reinterpret_cast<uint32_t*>(&a); }

// Shared (not FUTEX_PRIVATE): the two sides are different processes.
inline void futexWake(std::atomic<uint32_t>& word) {
  syscall(SYS_futex, futexWord(word), FUTEX_WAKE, 1, nullptr, nullptr, 0);
}

// Sleeps while `word` still holds `seen`, at most `timeoutNs` (0: no limit).
inline void futexWait(std::atomic<uint32_t>& word, uint32_t seen, int64_t timeoutNs) {
  struct timespec ts {};
  ts.tv_sec = static_cast<time_t>(timeoutNs / 1000000000);
  ts.tv_nsec = static_cast<long>(timeoutNs % 1000000000);
  syscall(SYS_futex, futexWord(word), FUTEX_WAIT, seen, timeoutNs > 0 ? &ts : nullptr, nullptr, 0);
}

inline size_t alignUp(size_t n, size_t a) { return (n + a - 1) / a * a; }

// --- socket messages -------------------------------------------------------------------------

inline void writeAll(int fd, const void* data, size_t n, int passFd) {
  const char* p = static_cast<const char*>(data);
  bool fdSent = passFd < 0;
  while (n > 0) {
    struct iovec iov {const_cast<char*>(p), n};
    struct msghdr msg {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    if (!fdSent) {
      std::memset(control, 0, sizeof control);
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(c), &passFd, sizeof(int));
    }
    ssize_t w = sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw Error("channel: send failed: " + errnoText());
    }
    fdSent = true;
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// Reads exactly n bytes; a descriptor that arrives on the way is returned through *gotFd (the
// first one; any other is closed). Returns false on a clean end of stream before the first byte.
inline bool readAll(int fd, void* data, size_t n, int* gotFd) {
  char* p = static_cast<char*>(data);
  size_t got = 0;
  while (got < n) {
    struct iovec iov {p + got, n - got};
    struct msghdr msg {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t r = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw Error("channel: receive failed: " + errnoText());
    }
    for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int f;
        std::memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        if (gotFd && *gotFd < 0) *gotFd = f;
        else close(f);
      }
    }
    if (r == 0) {
      if (got == 0) return false;
      throw Error("channel: the peer closed the connection in the middle of a message");
    }
    got += static_cast<size_t>(r);
  }
  return true;
}

inline void sendMessage(int fd, const std::string& json, int passFd = -1) {
  if (json.size() > kMaxMessage) throw Error("channel: message of " + std::to_string(json.size()) + " bytes is too long");
  unsigned char len[4];
  for (int i = 0; i < 4; ++i) len[i] = static_cast<unsigned char>((json.size() >> (8 * i)) & 0xff);
  std::string frame(reinterpret_cast<char*>(len), 4);
  frame += json;
  writeAll(fd, frame.data(), frame.size(), passFd);
}

// Returns false on a clean end of stream. A longer message than kMaxMessage is refused unread:
// the peer may be hostile.
inline bool receiveMessage(int fd, std::string& json, int* gotFd = nullptr) {
  if (gotFd) *gotFd = -1;
  unsigned char len[4];
  if (!readAll(fd, len, 4, gotFd)) return false;
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= static_cast<uint32_t>(len[i]) << (8 * i);
  if (n > kMaxMessage) throw Error("channel: the peer announced a message of " + std::to_string(n) + " bytes");
  json.assign(n, '\0');
  if (n && !readAll(fd, json.data(), n, gotFd)) throw Error("channel: the peer closed the connection");
  return true;
}

// True when the peer has hung up (or sent something while none was expected).
inline bool peerGone(int fd) {
  struct pollfd p {fd, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLHUP | POLLRDHUP | POLLERR)) != 0;
}

inline sockaddr_un socketAddress(const std::string& path) {
  sockaddr_un a {};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof a.sun_path) throw Error("channel: socket path too long: " + path);
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  return a;
}

// The worker's side: connects, waiting for the driver to listen (both sandboxes start together).
inline int connectTo(const std::string& path, int timeoutMs) {
  const sockaddr_un a = socketAddress(path);
  for (int waited = 0;; waited += 20) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw Error("channel: socket: " + errnoText());
    if (connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0) return fd;
    const int e = errno;
    close(fd);
    if ((e != ENOENT && e != ECONNREFUSED) || waited >= timeoutMs)
      throw Error("channel: cannot connect to " + path + ": " + std::strerror(e));
    usleep(20000);
  }
}

}  // namespace akachan
