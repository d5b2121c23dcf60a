// runner - the worker: the only program that contains candidate code (kernel.cpp, via the
// task's invoke.cpp), behind a thin loader that the candidate could change at will. It holds
// nothing worth tampering with: no clock that counts, no input before its call, no say in
// which outputs get checked. Those belong to the driver (driver_main.cpp).
//
//   runner serve --channel SOCK   connect to the driver listening on SOCK and run the calls it
//                                 sends (akachannel.h) until it says goodbye
//
// Exit status: 0 after the driver's goodbye, 1 when the channel or a call failed, 2 on usage.
#include "akachannel.h"
#include "akaharness.h"

#include <chrono>
#include <cstring>
#include <iostream>
#include <sys/mman.h>

namespace {

using nlohmann::json;

json tableOf(const TensorSet& set) {
  json t = json::array();
  for (const Tensor& x : set.tensors) t.push_back({{"name", x.name}, {"dtype", akt::dtypeName(x.dtype)}, {"dims", x.dims}});
  return t;
}

// Tensors described by the driver, allocated here only to ask invoke.cpp for its output shapes.
TensorSet shapesOf(const json& table) {
  TensorSet set;
  for (const json& t : table)
    set.add(Tensor(t.at("name").get<std::string>(), akt::parseDType(t.at("dtype").get<std::string>()),
                   t.at("dims").get<std::vector<uint64_t>>()));
  return set;
}

// The same tensors as views into the shared region, at the offsets the driver chose.
TensorSet viewsInto(unsigned char* base, size_t size, const TensorSet& shapes, const json& offsets) {
  TensorSet set;
  for (size_t i = 0; i < shapes.tensors.size(); ++i) {
    const Tensor& s = shapes.tensors[i];
    const uint64_t off = offsets.at(i).get<uint64_t>();
    if (off > size || s.bytes.size() > size - off) throw std::runtime_error("the region is too small for '" + s.name + "'");
    Tensor t;
    t.name = s.name;
    t.dtype = s.dtype;
    t.dims = s.dims;
    t.bytes = akt::Buffer::view(base + off, s.bytes.size());
    set.tensors.push_back(std::move(t));
  }
  return set;
}

class Mapping {
 public:
  Mapping(int fd, size_t size, int flags = 0) : size_(size) {
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | flags, fd, 0);
    if (p == MAP_FAILED) throw std::runtime_error(std::string("cannot map shared memory: ") + std::strerror(errno));
    base_ = static_cast<unsigned char*>(p);
  }
  ~Mapping() { munmap(base_, size_); }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  unsigned char* base() const { return base_; }
  akachan::Header& header() const { return *reinterpret_cast<akachan::Header*>(base_); }

 private:
  unsigned char* base_;
  size_t size_;
};

// Runs the calls of one configuration until the driver ends it.
void serveGroup(int sock, const json& group) {
  Config config(group.at("config"));
  TensorSet inShapes = shapesOf(group.at("inputs"));
  TensorSet outShapes = akaAllocateOutputs(config, inShapes);
  akachan::sendMessage(sock, json{{"type", "outputs"}, {"outputs", tableOf(outShapes)}}.dump());

  std::string text;
  int fd = -1;
  if (!akachan::receiveMessage(sock, text, &fd)) throw std::runtime_error("the driver hung up");
  json region = json::parse(text);
  if (fd < 0) throw std::runtime_error("the driver sent no region");
  const size_t size = region.at("size").get<size_t>();
  Mapping map(fd, size);
  close(fd);
  TensorSet out = viewsInto(map.base(), size, outShapes, region.at("outputs"));
  const json inputOffsets = region.at("inputs");
  const size_t inputBytes = region.at("inputs_size").get<size_t>();
  akachan::Header& h = map.header();
  // Read before saying "mapped": the driver's first go may follow that message at once, and a
  // worker that read it afterwards would wait for a change that already happened.
  uint32_t last = h.go.load(std::memory_order_acquire);
  akachan::sendMessage(sock, json{{"type", "mapped"}}.dump());

  for (;;) {
    uint32_t n;
    // Naps on the futex and looks at the socket between them: a driver that is gone (it found
    // a fault, or its sandbox ended) ends this worker too. The input file of a call is already
    // in the socket when go comes, so the socket is readable then: only a hang-up counts.
    while ((n = h.go.load(std::memory_order_acquire)) == last) {
      akachan::futexWait(h.go, last, 50000000);
      if (h.go.load(std::memory_order_acquire) == last && akachan::peerGone(sock))
        throw std::runtime_error("the driver hung up");
    }
    last = n;
    const uint32_t cmd = h.cmd;
    if (cmd == akachan::kEndGroup) {
      h.status = akachan::kOk;
      h.done.store(n, std::memory_order_release);
      akachan::futexWake(h.done);
      return;
    }
    // The call's inputs arrive only now, as a file of their own.
    int inFd = -1;
    if (!akachan::receiveMessage(sock, text, &inFd) || inFd < 0) throw std::runtime_error("the driver sent no inputs");
    Mapping inputs(inFd, inputBytes, MAP_POPULATE);
    close(inFd);
    TensorSet in = viewsInto(inputs.base(), inputBytes, inShapes, inputOffsets);
    uint32_t status = akachan::kOk;
    if (cmd == akachan::kCall) {
      const auto t0 = std::chrono::steady_clock::now();
      try {
        akaInvoke(config, in, out);
      } catch (const std::exception& e) {
        std::cerr << "runner: " << config.name() << ": " << e.what() << "\n";
        status = akachan::kFailed;
      }
      h.inprocNs = static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
    }
    h.status = status;
    h.done.store(n, std::memory_order_release);
    akachan::futexWake(h.done);
  }
}

int serve(const std::string& channel) {
  const int sock = akachan::connectTo(channel, 120000);
  akachan::sendMessage(sock, json{{"type", "hello"}, {"harness", "cpp"}}.dump());
  for (std::string text; akachan::receiveMessage(sock, text);) {
    json msg = json::parse(text);
    const std::string type = msg.at("type");
    if (type == "bye") return 0;
    if (type != "group") throw std::runtime_error("unexpected message '" + type + "'");
    try {
      serveGroup(sock, msg);
    } catch (const std::exception& e) {
      // The driver names the failure in its log; the worker's own stderr says it too.
      try {
        akachan::sendMessage(sock, json{{"type", "error"}, {"message", std::string(e.what()).substr(0, 2000)}}.dump());
      } catch (const akachan::Error&) {  // the driver is gone already
      }
      throw;
    }
  }
  throw std::runtime_error("the driver hung up without a goodbye");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 || std::strcmp(argv[1], "serve") != 0 || std::strcmp(argv[2], "--channel") != 0) {
    std::cerr << "usage: runner serve --channel SOCK\n";
    return 2;
  }
  try {
    return serve(argv[3]);
  } catch (const std::exception& e) {
    std::cerr << "runner: " << e.what() << "\n";
    return 1;
  }
}
