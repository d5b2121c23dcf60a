// runner - the only program that contains candidate code (kernel.hip, via the task's invoke.hip).
//
//   runner serve --channel SOCK              the worker: connects to the trusted driver
//                                            (driver_main.hip) listening on SOCK, maps the
//                                            device memory it lends, and calls the kernel on
//                                            every go until the driver says goodbye
//   runner check --plan P --data D --out O   one kernel call per case, writes O/<case>.out.akt
//   runner perf  --plan P --data D --out O   timed calls per perf group, writes
//                                            O/<group>.times.json, O/<case>.out.akt and
//                                            O/gpu_state.json (clocks/temperature before, after)
//
// serve holds nothing worth tampering with: no clock that counts, no input before its call, no
// say in which outputs get checked. A call: on go, record an event, akaInvoke, record an event,
// synchronise the whole device (work on side streams included), write the events' time into
// the header (a second opinion, never trusted) and say done. An empty call (the baseline's
// calibration) does the same around an empty kernel of its own. In a queued window
// (kWindowQueued) a call says done once akaInvoke has returned; the events span the window, and
// the whole device is synchronised at its last call only; an empty call launches nothing.
//
// check and perf are the harness before the driver, kept as the event-timed runner that
// scripts/device-hip-driver compares the driver with (the scorer runs hip tasks through the
// driver): the runner reads its inputs from files and times itself. A timed call of perf:
// (untimed) copy the next input set device-to-device into the same input buffers, fill the
// outputs with 0xff bytes (NaN), write flush_bytes of device memory (evicts the 50 MiB L2),
// synchronise the device; then queue a 100 us GPU wait (hides the host's launch latency from the events), record the start
// event, call the kernel, record the stop event and synchronise the whole device, so a call's
// work is finished before the next begins. samples_ns are event times; wall_ns (host clock from
// before the start event to after the device synchronisation, so it includes launch and sync
// latency) come alongside for checks. It reads only D/<case>.in.akt of the cases it runs; seeds
// in the plan are ignored.
// Exit status: 0 when every case ran (serve: after the driver's goodbye), 1 when one failed (the
// others still run; serve: the channel or a call failed), 2 on usage.
#include "akachannel.h"
#include "akadevice.h"
#include "akaplan.h"
#include "akavmm.h"
#include "akawait.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sys/mman.h>
#include <sys/stat.h>

namespace {

std::map<std::string, std::string> parseOptions(int argc, char** argv) {
  std::map<std::string, std::string> opts;
  for (int i = 2; i < argc; ++i) {
    std::string key = argv[i];
    if (key.rfind("--", 0) != 0 || i + 1 >= argc) throw std::runtime_error("bad argument '" + key + "'");
    opts[key.substr(2)] = argv[++i];
  }
  for (const char* k : {"plan", "data", "out"})
    if (!opts.count(k)) throw std::runtime_error(std::string("missing --") + k);
  return opts;
}

void upload(const DeviceSet& dst, const TensorSet& src) {
  for (size_t i = 0; i < src.tensors.size(); ++i)
    AKA_HIP_CHECK(hipMemcpy(dst.tensors()[i].ptr, src.tensors[i].bytes.data(), src.tensors[i].bytes.size(),
                            hipMemcpyHostToDevice));
}

void download(TensorSet& dst, const DeviceSet& src) {
  for (size_t i = 0; i < dst.tensors.size(); ++i)
    AKA_HIP_CHECK(hipMemcpy(dst.tensors[i].bytes.data(), src.tensors()[i].ptr, dst.tensors[i].bytes.size(),
                            hipMemcpyDeviceToHost));
}

// Outputs start as all-ones bytes (NaN for every float dtype, -1 for integers), so a kernel that
// skips elements cannot pass on whatever an earlier call left behind.
void poison(const DeviceSet& out) {
  for (const DeviceTensor& t : out.tensors())
    if (t.bytes) AKA_HIP_CHECK(hipMemsetAsync(t.ptr, 0xff, t.bytes, 0));
}

// Surfaces a launch error of the candidate's call (without waiting for its kernels).
void checkLaunch(const char* what, hipError_t launch) {
  if (launch != hipSuccess) throw std::runtime_error(std::string(what) + ": launch failed: " + hipGetErrorString(launch));
}

// Surfaces launch and asynchronous kernel errors of the candidate's call.
void finishCall(const char* what) {
  const hipError_t launch = hipGetLastError();
  const hipError_t sync = hipDeviceSynchronize();
  checkLaunch(what, launch);
  if (sync != hipSuccess) throw std::runtime_error(std::string(what) + ": kernel failed: " + hipGetErrorString(sync));
}

__global__ void flushKernel(uint32_t* p, size_t n, uint32_t value) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = value;
}

// Keeps the GPU busy for about 100 us of wall-clock time. Queued just before the start event: the
// host needs several microseconds to launch the candidate's kernel after recording the event, and
// on an idle GPU the events would time that launch latency (and its jitter under CPU load) too.
// Behind the wait the candidate's work is already queued when the GPU reaches the start event.
__global__ void launchShadowKernel(long long ticks) {
  const long long t0 = wall_clock64();
  while (wall_clock64() - t0 < ticks) {
  }
}

class LaunchShadow {
 public:
  LaunchShadow() {
    int device = 0, kHz = 0;
    AKA_HIP_CHECK(hipGetDevice(&device));
    AKA_HIP_CHECK(hipDeviceGetAttribute(&kHz, hipDeviceAttributeWallClockRate, device));
    ticks_ = static_cast<long long>(kHz) * kMicroseconds / 1000;
  }
  void queue() const {
    hipLaunchKernelGGL(launchShadowKernel, dim3(1), dim3(1), 0, 0, ticks_);
    AKA_HIP_CHECK(hipGetLastError());
  }

 private:
  static constexpr long long kMicroseconds = 100;
  long long ticks_ = 0;
};

// Evicts the kernel's data from L2 between timed calls by writing a buffer larger than it.
class CacheFlusher {
 public:
  explicit CacheFlusher(uint64_t bytes) : words_(bytes / 4) {
    if (words_) AKA_HIP_CHECK(hipMalloc(&buf_, words_ * 4));
  }
  ~CacheFlusher() { if (buf_) (void)hipFree(buf_); }
  CacheFlusher(const CacheFlusher&) = delete;
  CacheFlusher& operator=(const CacheFlusher&) = delete;
  void flush() {
    if (!words_) return;
    hipLaunchKernelGGL(flushKernel, dim3(1024), dim3(256), 0, 0, buf_, words_, ++round_);
    AKA_HIP_CHECK(hipGetLastError());
  }

 private:
  size_t words_;
  uint32_t* buf_ = nullptr;
  uint32_t round_ = 0;
};

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  size_t b = s.find_first_not_of(' ');
  return b == std::string::npos ? "" : s.substr(b);
}

// GPU clocks and temperature, for the scorer's throttling check. nvidia-smi (queried by the
// device's PCI bus id, so CUDA_VISIBLE_DEVICES numbering does not matter) when the sandbox has
// it; otherwise only what the runtime reports, which is the nominal maximum, not the current clock.
nlohmann::json gpuState() {
  nlohmann::json s = nlohmann::json::object();
  int dev = 0, clockKHz = 0, memClockKHz = 0;
  char bus[64] = {0};
  if (hipGetDevice(&dev) == hipSuccess) {
    if (hipDeviceGetAttribute(&clockKHz, hipDeviceAttributeClockRate, dev) == hipSuccess)
      s["runtime_max_sm_clock_mhz"] = clockKHz / 1000;
    if (hipDeviceGetAttribute(&memClockKHz, hipDeviceAttributeMemoryClockRate, dev) == hipSuccess)
      s["runtime_max_mem_clock_mhz"] = memClockKHz / 1000;
    if (hipDeviceGetPCIBusId(bus, sizeof bus, dev) == hipSuccess) s["pci_bus_id"] = bus;
  }
  const char* fields[] = {"clocks.sm", "clocks.mem", "clocks.max.sm", "temperature.gpu", "power.draw",
                          "clocks_event_reasons.active"};
  std::string cmd = "nvidia-smi --format=csv,noheader,nounits";
  if (bus[0]) cmd += std::string(" -i ") + bus;
  cmd += " --query-gpu=";
  bool any = false;
  // One query per field: an unknown field (older nvidia-smi) must not lose the others.
  for (const char* f : fields) {
    std::FILE* p = popen((cmd + f + " 2>/dev/null").c_str(), "r");
    if (!p) break;
    char line[256] = {0};
    bool got = std::fgets(line, sizeof line, p) != nullptr;
    int rc = pclose(p);
    if (got && rc == 0) {
      std::string v = trim(line);
      char* end = nullptr;
      double num = std::strtod(v.c_str(), &end);
      if (end && *end == '\0' && !v.empty()) s[f] = num;
      else s[f] = v;
      any = true;
    }
  }
  s["source"] = any ? "nvidia-smi" : "runtime (nvidia-smi unavailable: no current clock or temperature)";
  return s;
}

int check(const akaplan::Plan& plan, const std::string& data, const std::string& outDir) {
  int failures = 0;
  for (const akaplan::Case& c : plan.cases) {
    try {
      Config config(c.config);
      TensorSet in = akt::readAkt(data + "/" + c.name + ".in.akt");
      TensorSet out = akaAllocateOutputs(config, in);
      DeviceSet din(in), dout(out);
      upload(din, in);
      poison(dout);
      AKA_HIP_CHECK(hipDeviceSynchronize());
      akaInvoke(config, din, dout);
      finishCall("kernel call");
      download(out, dout);
      akt::writeAkt(outDir + "/" + c.name + ".out.akt", out);
    } catch (const std::exception& e) {
      std::cerr << "runner: case " << c.name << ": " << e.what() << "\n";
      ++failures;
      (void)hipGetLastError();  // a failed case must not poison the next one's error checks
    }
  }
  return failures ? 1 : 0;
}

void copyInto(const DeviceSet& dst, const DeviceSet& src) {
  for (size_t i = 0; i < dst.size(); ++i)
    if (dst.tensors()[i].bytes)
      AKA_HIP_CHECK(hipMemcpyAsync(dst.tensors()[i].ptr, src.tensors()[i].ptr, dst.tensors()[i].bytes,
                                   hipMemcpyDeviceToDevice, 0));
}

class Event {
 public:
  Event() { AKA_HIP_CHECK(hipEventCreate(&e_)); }
  ~Event() { (void)hipEventDestroy(e_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  hipEvent_t get() const { return e_; }

 private:
  hipEvent_t e_;
};

void perfGroup(const akaplan::Plan& plan, const akaplan::PerfGroup& group, const std::string& data,
               const std::string& outDir, CacheFlusher& flusher) {
  const akaplan::Case& first = *plan.findCase(group.cases.front());
  Config config(first.config);
  std::vector<TensorSet> hostSets;
  for (const std::string& name : group.cases) {
    if (plan.findCase(name)->config != first.config)
      throw std::runtime_error("case '" + name + "' has another configuration than '" + first.name + "'");
    hostSets.push_back(akt::readAkt(data + "/" + name + ".in.akt"));
    const TensorSet& s = hostSets.back();
    if (s.size() != hostSets.front().size())
      throw std::runtime_error("case '" + name + "' has a different number of input tensors");
    for (size_t i = 0; i < s.size(); ++i) {
      const Tensor& a = s.tensors[i];
      const Tensor& b = hostSets.front().tensors[i];
      if (a.name != b.name || a.dtype != b.dtype || a.dims != b.dims)
        throw std::runtime_error("input sets of one perf group differ in tensor '" + a.name + "'");
    }
  }
  // Every input set is staged on the device once; timed calls always see the same input and
  // output addresses, and rotating distinct contents through them defeats caching by pointer.
  std::vector<DeviceSet> staged;
  for (const TensorSet& s : hostSets) {
    staged.emplace_back(s);
    upload(staged.back(), s);
  }
  DeviceSet din(hostSets.front());
  TensorSet out = akaAllocateOutputs(config, hostSets.front());
  DeviceSet dout(out);
  const size_t n = staged.size();
  for (int i = 0; i < plan.perf.warmup; ++i) {
    copyInto(din, staged[i % n]);
    poison(dout);
    AKA_HIP_CHECK(hipDeviceSynchronize());
    akaInvoke(config, din, dout);
    finishCall("warmup call");
  }
  Event start, stop;
  const LaunchShadow shadow;
  std::vector<int64_t> samples, wall;
  const int total = std::max<int>(plan.perf.samples, static_cast<int>(n));
  for (int i = 0; i < total; ++i) {
    const size_t k = i % n;
    copyInto(din, staged[k]);
    poison(dout);
    flusher.flush();
    AKA_HIP_CHECK(hipDeviceSynchronize());
    auto t0 = std::chrono::steady_clock::now();
    shadow.queue();
    AKA_HIP_CHECK(hipEventRecord(start.get(), 0));
    akaInvoke(config, din, dout);
    AKA_HIP_CHECK(hipEventRecord(stop.get(), 0));
    finishCall("timed call");
    auto t1 = std::chrono::steady_clock::now();
    float ms = 0;
    AKA_HIP_CHECK(hipEventElapsedTime(&ms, start.get(), stop.get()));
    if (i < plan.perf.samples) {
      samples.push_back(static_cast<int64_t>(static_cast<double>(ms) * 1e6));
      wall.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
    }
    if (i + static_cast<int>(n) >= total) {  // the last call on input set k
      download(out, dout);
      akt::writeAkt(outDir + "/" + group.cases[k] + ".out.akt", out);
    }
  }
  nlohmann::json times = {{"samples_ns", samples}, {"wall_ns", wall}, {"warmup", plan.perf.warmup},
                          {"input_sets", n}, {"timer", "hipEvent"}};
  std::ofstream f(outDir + "/" + group.name + ".times.json");
  f << times.dump() << "\n";
  if (!f.flush()) throw std::runtime_error("cannot write " + outDir + "/" + group.name + ".times.json");
  std::vector<int64_t> sorted = samples;
  std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
  std::cerr << "runner: " << group.name << ": median " << sorted[sorted.size() / 2] / 1e3 << " us over "
            << samples.size() << " samples\n";
}

int perf(const akaplan::Plan& plan, const std::string& data, const std::string& outDir) {
  if (!plan.hasPerf) throw std::runtime_error("the plan has no 'perf' section");
  nlohmann::json state = {{"before", gpuState()}};
  CacheFlusher flusher(plan.perf.flushBytes);
  int failures = 0;
  for (const akaplan::PerfGroup& g : plan.perf.groups) {
    try {
      perfGroup(plan, g, data, outDir, flusher);
    } catch (const std::exception& e) {
      std::cerr << "runner: perf group " << g.name << ": " << e.what() << "\n";
      ++failures;
      (void)hipGetLastError();
    }
  }
  state["after"] = gpuState();
  std::ofstream f(outDir + "/gpu_state.json");
  f << state.dump(1) << "\n";
  if (!f.flush()) throw std::runtime_error("cannot write " + outDir + "/gpu_state.json");
  return failures ? 1 : 0;
}

// --- serve: the worker of the driver ---------------------------------------------------------

using nlohmann::json;

json tableOf(const TensorSet& set) {
  json t = json::array();
  for (const Tensor& x : set.tensors) t.push_back({{"name", x.name}, {"dtype", akt::dtypeName(x.dtype)}, {"dims", x.dims}});
  return t;
}

// The tensors the driver describes, as shapes only (no host memory behind them).
TensorSet shapesOf(const json& table) {
  TensorSet set;
  for (const json& t : table) {
    Tensor x;
    x.name = t.at("name").get<std::string>();
    x.dtype = akt::parseDType(t.at("dtype").get<std::string>());
    x.dims = t.at("dims").get<std::vector<uint64_t>>();
    x.bytes = akt::Buffer::view(nullptr, x.elements() * akt::dtypeSize(x.dtype));
    set.add(std::move(x));
  }
  return set;
}

// The same tensors as views into the shared device memory, at the offsets the driver chose.
DeviceSet viewsInto(const SharedDeviceMemory& mem, const TensorSet& shapes, const json& offsets) {
  if (!offsets.is_array() || offsets.size() != shapes.size())
    throw std::runtime_error("the driver gave " + offsets.dump() + " as offsets of " + std::to_string(shapes.size()) + " tensors");
  std::vector<void*> ptrs;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const uint64_t off = offsets.at(i).get<uint64_t>();
    const size_t bytes = shapes.tensors[i].bytes.size();
    if (off > mem.size() || bytes > mem.size() - off)
      throw std::runtime_error("the shared device memory is too small for '" + shapes.tensors[i].name + "'");
    ptrs.push_back(mem.base() + off);
  }
  return DeviceSet::views(shapes, ptrs);
}

// The header page (akachannel.h) the driver passed as a memfd.
class HeaderPage {
 public:
  HeaderPage(int fd, size_t size) : size_(size) {
    if (size < sizeof(akachan::Header)) throw std::runtime_error("the driver's region is smaller than its header");
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) throw std::runtime_error(std::string("cannot map the region: ") + std::strerror(errno));
    base_ = p;
  }
  ~HeaderPage() { munmap(base_, size_); }
  HeaderPage(const HeaderPage&) = delete;
  HeaderPage& operator=(const HeaderPage&) = delete;
  akachan::Header& header() const { return *static_cast<akachan::Header*>(base_); }

 private:
  void* base_;
  size_t size_;
};

// Closes a received descriptor on every path.
struct ReceivedFd {
  int fd = -1;
  ~ReceivedFd() {
    if (fd >= 0) close(fd);
  }
};

json receiveWithFd(int sock, const char* type, ReceivedFd& fd) {
  std::string text;
  if (!akachan::receiveMessage(sock, text, &fd.fd)) throw std::runtime_error("the driver hung up");
  json msg = json::parse(text);
  if (msg.value("type", "") != type) throw std::runtime_error(std::string("expected the driver's '") + type + "'");
  if (fd.fd < 0) throw std::runtime_error(std::string("the driver's '") + type + "' came without a descriptor");
  return msg;
}

// A window's input pool (the driver's "pool" message and descriptor): `sets` input sets of
// the group's shapes, `stride` bytes apart, each laid out at `offsets`.
class InputPool {
 public:
  InputPool(int device, int fd, const json& msg, const TensorSet& shapes)
      : mem_(SharedDeviceMemory::import(device, fd, msg.at("size").get<size_t>())),
        sets_(msg.at("sets").get<uint64_t>()),
        stride_(msg.at("stride").get<uint64_t>()),
        shapes_(shapes),
        offsets_(msg.at("offsets")) {
    if (sets_ == 0 || stride_ == 0 || sets_ > mem_.size() / stride_)
      throw std::runtime_error("the driver's pool of " + std::to_string(sets_) + " sets does not fit its memory");
    if (!offsets_.is_array() || offsets_.size() != shapes_.size())
      throw std::runtime_error("the driver gave " + offsets_.dump() + " as offsets of " + std::to_string(shapes_.size()) + " tensors");
    for (size_t i = 0; i < shapes_.size(); ++i) {
      const uint64_t off = offsets_.at(i).get<uint64_t>();
      if (off > stride_ || shapes_.tensors[i].bytes.size() > stride_ - off)
        throw std::runtime_error("an input set's stride is too small for '" + shapes_.tensors[i].name + "'");
    }
  }

  DeviceSet set(uint32_t i) const {
    if (i >= sets_) throw std::runtime_error("the driver named input set " + std::to_string(i) + " of " + std::to_string(sets_));
    std::vector<void*> ptrs;
    for (const json& off : offsets_) ptrs.push_back(mem_.base() + i * stride_ + off.get<uint64_t>());
    return DeviceSet::views(shapes_, ptrs);
  }

 private:
  SharedDeviceMemory mem_;
  uint64_t sets_, stride_;
  const TensorSet& shapes_;
  json offsets_;
};

// The calibration's stand-in for a kernel: a launch that does nothing.
__global__ void emptyKernel() {}

// The group's output sets, one per call of a window, in the allocation the driver lends.
std::vector<DeviceSet> outputSetsIn(const SharedDeviceMemory& shared, const TensorSet& outShapes, const json& device) {
  const uint64_t sets = device.at("output_sets").get<uint64_t>();
  const uint64_t stride = device.at("output_stride").get<uint64_t>();
  if (sets == 0 || sets > 1024 || (sets > 1 && stride > shared.size() / (sets - 1)))
    throw std::runtime_error("the driver's " + std::to_string(sets) + " output sets do not fit its memory");
  std::vector<DeviceSet> out;
  json offsets = device.at("outputs");
  for (uint64_t j = 0; j < sets; ++j) {
    json shifted = json::array();
    for (const json& o : offsets) shifted.push_back(o.get<uint64_t>() + j * stride);
    out.push_back(viewsInto(shared, outShapes, shifted));
  }
  return out;
}

// Runs the calls of one configuration until the driver ends it.
void serveGroup(int sock, const json& group) {
  constexpr int kDevice = 0;
  const Config config(group.at("config"));
  const TensorSet inShapes = shapesOf(group.at("inputs"));
  const TensorSet outShapes = akaAllocateOutputs(config, inShapes);
  akachan::sendMessage(sock, json{{"type", "outputs"}, {"outputs", tableOf(outShapes)}}.dump());

  ReceivedFd regionFd, deviceFd;
  const json region = receiveWithFd(sock, "region", regionFd);
  const HeaderPage page(regionFd.fd, region.at("size").get<size_t>());
  const json device = receiveWithFd(sock, "device", deviceFd);
  const SharedDeviceMemory shared = SharedDeviceMemory::import(kDevice, deviceFd.fd, device.at("size").get<size_t>());
  std::vector<DeviceSet> outs = outputSetsIn(shared, outShapes, device);
  Event start, stop;
  const LaunchShadow shadow;
  akachan::Header& h = page.header();
  uint32_t last = h.go.load(std::memory_order_acquire);  // before "mapped": the first go may follow it at once
  akachan::sendMessage(sock, json{{"type", "mapped"}}.dump());
  // This window's inputs: an allocation of their own, whose descriptor the driver sends only
  // after its clock has started; unmapped once the window's last call is done.
  std::optional<InputPool> pool;
  uint32_t calls = 0;  // of the window so far (queued: the events span them all)
  for (;;) {
    bool gone = false;
    const uint32_t n = akawait::awaitChange(h.go, last, sock, &gone);
    if (gone) throw std::runtime_error("the driver hung up");
    last = n;
    const uint32_t cmd = h.cmd;
    const uint32_t window = h.window;
    uint32_t status = akachan::kOk;
    if (cmd == akachan::kCall || cmd == akachan::kEmpty || cmd == akachan::kPrime) {
      try {
        if (cmd == akachan::kPrime) {
          // 100 us of GPU work: the GPU switches to this context and leaves its idle state
          // (after the driver's untimed preparation the first call of a batch ran ~200 us slow).
          shadow.queue();
          finishCall("priming wait");
        } else {
          if (window & akachan::kWindowOpen) {
            ReceivedFd poolFd;
            const json msg = receiveWithFd(sock, "pool", poolFd);
            pool.reset();
            pool.emplace(kDevice, poolFd.fd, msg, inShapes);
          }
          if (!pool) throw std::runtime_error("the driver named an input set before sending a pool");
          if (h.outSet >= outs.size()) throw std::runtime_error("the driver named output set " + std::to_string(h.outSet));
          const DeviceSet in = pool->set(h.slot);
          // Queued: the events span the window, the device is synchronised once at its end, and
          // an empty call launches nothing (the calibration is the window's fixed cost).
          const bool queued = window & akachan::kWindowQueued;
          if (!queued || (window & akachan::kWindowOpen)) {
            AKA_HIP_CHECK(hipEventRecord(start.get(), 0));
            calls = 0;
          }
          ++calls;
          if (cmd == akachan::kCall) akaInvoke(config, in, outs[h.outSet]);
          else if (!queued) hipLaunchKernelGGL(emptyKernel, dim3(1), dim3(1), 0, 0);
          h.inprocNs = 0;
          if (queued && !(window & akachan::kWindowClose)) {
            checkLaunch("kernel call", hipGetLastError());
          } else {
            AKA_HIP_CHECK(hipEventRecord(stop.get(), 0));
            finishCall(cmd == akachan::kCall ? "kernel call" : "empty call");
            float ms = 0;
            AKA_HIP_CHECK(hipEventElapsedTime(&ms, start.get(), stop.get()));
            h.inprocNs = static_cast<uint64_t>(static_cast<double>(ms) * 1e6 / calls);
          }
        }
      } catch (const std::exception& e) {
        std::cerr << "runner: " << config.name() << ": " << e.what() << "\n";
        status = akachan::kFailed;
      }
    }
    h.status = status;
    h.done.store(n, std::memory_order_release);
    akachan::futexWake(h.done);
    if (window & akachan::kWindowClose) pool.reset();
    if (cmd == akachan::kEndGroup) return;
  }
}

int serve(const std::string& channel) {
  // One hardware queue for the context made below: a window's calls are queued back to back,
  // and calls that a candidate puts on streams of their own may not run side by side, except
  // for where one ends and the next begins (the scorer's sandbox sets the same before start).
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1", 1);
  AKA_HIP_CHECK(hipSetDevice(0));
  const int sock = akachan::connectTo(channel, 120000);
  akachan::sendMessage(sock, json{{"type", "hello"}, {"harness", "hip"}}.dump());
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
  if (argc == 4 && std::strcmp(argv[1], "serve") == 0 && std::strcmp(argv[2], "--channel") == 0) {
    std::signal(SIGPIPE, SIG_IGN);
    try {
      return serve(argv[3]);
    } catch (const std::exception& e) {
      std::cerr << "runner: " << e.what() << "\n";
      return 1;
    }
  }
  if (argc < 2 || (std::strcmp(argv[1], "check") != 0 && std::strcmp(argv[1], "perf") != 0)) {
    std::cerr << "usage: runner serve --channel SOCK\n"
                 "       runner check|perf --plan P --data D --out O\n";
    return 2;
  }
  std::map<std::string, std::string> opts;
  akaplan::Plan plan;
  try {
    opts = parseOptions(argc, argv);
    plan = akaplan::readPlan(opts["plan"]);
    if (mkdir(opts["out"].c_str(), 0755) != 0 && errno != EEXIST)
      throw std::runtime_error("cannot create " + opts["out"] + ": " + std::strerror(errno));
  } catch (const std::exception& e) {
    std::cerr << "runner: " << e.what() << "\n";
    return 2;
  }
  try {
    if (std::strcmp(argv[1], "check") == 0) return check(plan, opts["data"], opts["out"]);
    return perf(plan, opts["data"], opts["out"]);
  } catch (const std::exception& e) {
    std::cerr << "runner: " << e.what() << "\n";
    return 1;
  }
}
