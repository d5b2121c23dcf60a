// akt.h - the .akt tensor file format shared by every harness program and the checker.
//
// Layout (little-endian): "AKT1", u32 tensor count, then per tensor: u16 name length, name
// bytes, u8 dtype, u8 rank, u64 dims[rank], row-major data. See docs/tasks.md.
//
// Header-only and dependency-free on purpose: it is copied into every agent workspace and
// built there with plain g++ (C++17).
#pragma once

#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <sys/stat.h>
#include <utility>
#include <vector>

namespace akt {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class DType : uint8_t { F32 = 0, F64 = 1, F16 = 2, BF16 = 3, I32 = 4, I64 = 5, U8 = 6, I8 = 7 };

inline bool validDType(uint8_t code) { return code <= 7; }

inline size_t dtypeSize(DType t) {
  switch (t) {
    case DType::F64: case DType::I64: return 8;
    case DType::F32: case DType::I32: return 4;
    case DType::F16: case DType::BF16: return 2;
    case DType::U8: case DType::I8: return 1;
  }
  return 0;
}

inline const char* dtypeName(DType t) {
  static const char* const names[] = {"f32", "f64", "f16", "bf16", "i32", "i64", "u8", "i8"};
  return validDType(static_cast<uint8_t>(t)) ? names[static_cast<uint8_t>(t)] : "invalid";
}

inline bool isFloat(DType t) {
  return t == DType::F32 || t == DType::F64 || t == DType::F16 || t == DType::BF16;
}

inline DType parseDType(const std::string& s) {
  for (uint8_t c = 0; c <= 7; ++c)
    if (s == dtypeName(static_cast<DType>(c))) return static_cast<DType>(c);
  throw Error("unknown dtype '" + s + "' (expected f32, f64, f16, bf16, i32, i64, u8 or i8)");
}

class Buffer;
struct TensorSet;

// Blocks of memory that a Buffer made on this thread takes, while the pool is in use, before it
// asks the allocator. The scorer's driver generates every timed call's inputs anew, of the same
// sizes each call, and fresh memory costs a page fault per 4 KiB at its first touch (on a virtual
// machine that shadows page tables, more than generating the inputs); a block handed back from
// the previous call's inputs costs only its zero-fill. A block taken is zeroed like new memory,
// so a generator sees the same bytes either way.
class BufferPool {
 public:
  BufferPool() = default;
  ~BufferPool() {
    for (const Block& b : blocks_) std::free(b.data);
  }
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // Keeps the memory that `b` owns, for a Buffer of the same size to take; a view is dropped.
  inline void recycle(Buffer&& b);
  // The same for every tensor of `set`, which is left empty.
  inline void recycle(TensorSet&& set);

  // While a Use lives, Buffers made on its thread take blocks from `pool`.
  class Use {
   public:
    explicit Use(BufferPool& pool) : previous_(std::exchange(current(), &pool)) {}
    ~Use() { current() = previous_; }
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;

   private:
    BufferPool* previous_;
  };

 private:
  friend class Buffer;
  struct Block {
    unsigned char* data;
    size_t size;
  };
  static BufferPool*& current() {
    static thread_local BufferPool* pool = nullptr;
    return pool;
  }
  // A block of exactly n bytes from the pool in use on this thread, or null.
  static unsigned char* take(size_t n) {
    BufferPool* pool = current();
    if (!pool) return nullptr;
    for (size_t i = 0; i < pool->blocks_.size(); ++i) {
      if (pool->blocks_[i].size != n) continue;
      unsigned char* data = pool->blocks_[i].data;
      pool->blocks_.erase(pool->blocks_.begin() + static_cast<std::ptrdiff_t>(i));
      return data;
    }
    return nullptr;
  }
  std::vector<Block> blocks_;
};

// 64-byte aligned storage so kernels may use aligned SIMD loads on every tensor. A view
// (Buffer::view) points into memory owned elsewhere, such as the shared region through which the
// scorer's driver hands a worker its inputs; copying a view makes an owned copy.
class Buffer {
 public:
  Buffer() = default;
  // n zero bytes: generators and references may rely on the zeros.
  explicit Buffer(size_t n) : Buffer(uninitialized(n)) {
    if (n) std::memset(data_, 0, n);
  }
  // n bytes of whatever the memory held: only for a caller that writes every one of them before
  // anything reads them (a copy, a read from a file).
  static Buffer uninitialized(size_t n) {
    Buffer b;
    b.size_ = n;
    b.owned_ = true;
    if (n == 0) return b;
    b.data_ = BufferPool::take(n);
    if (!b.data_) b.data_ = static_cast<unsigned char*>(std::aligned_alloc(64, (n + 63) / 64 * 64));
    if (!b.data_) throw std::bad_alloc();
    return b;
  }
  static Buffer view(unsigned char* data, size_t n) {
    Buffer b;
    b.data_ = data;
    b.size_ = n;
    return b;
  }
  Buffer(const Buffer& o) : Buffer(uninitialized(o.size_)) { if (size_) std::memcpy(data_, o.data_, size_); }
  Buffer(Buffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)), owned_(std::exchange(o.owned_, false)) {}
  Buffer& operator=(Buffer o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(owned_, o.owned_);
    return *this;
  }
  ~Buffer() { if (owned_) std::free(data_); }
  unsigned char* data() { return data_; }
  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  friend class BufferPool;
  unsigned char* data_ = nullptr;
  size_t size_ = 0;
  bool owned_ = false;
};

inline void BufferPool::recycle(Buffer&& b) {
  Buffer gone(std::move(b));
  if (!gone.owned_ || !gone.data_) return;
  blocks_.reserve(blocks_.size() + 1);  // may throw; until the push below, `gone` still frees the block
  blocks_.push_back({std::exchange(gone.data_, nullptr), gone.size_});
  gone.owned_ = false;
}

struct Tensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<uint64_t> dims;
  Buffer bytes;

  Tensor() = default;
  Tensor(std::string n, DType t, std::vector<uint64_t> d) : name(std::move(n)), dtype(t), dims(std::move(d)) {
    bytes = Buffer(elements() * dtypeSize(dtype));
  }

  uint64_t elements() const {
    uint64_t n = 1;
    for (uint64_t d : dims) n *= d;
    return n;
  }

  // Typed view; T must have the element size of the dtype (uint16_t for f16/bf16).
  template <class T> T* data() { checkSize(sizeof(T)); return reinterpret_cast<T*>(bytes.data()); }
  template <class T> const T* data() const { checkSize(sizeof(T)); return reinterpret_cast<const T*>(bytes.data()); }

  std::string shapeString() const {
    std::string s = "[";
    for (size_t i = 0; i < dims.size(); ++i) {
      if (i) s += ',';
      s += std::to_string(dims[i]);
    }
    s += ']';
    return s;
  }

 private:
  void checkSize(size_t elemSize) const {
    if (elemSize != dtypeSize(dtype))
      throw Error("tensor '" + name + "' has dtype " + dtypeName(dtype) + ", accessed with a " +
                  std::to_string(elemSize) + "-byte type");
  }
};

struct TensorSet {
  std::vector<Tensor> tensors;

  Tensor& add(Tensor t) {
    if (find(t.name)) throw Error("duplicate tensor name '" + t.name + "'");
    tensors.push_back(std::move(t));
    return tensors.back();
  }
  const Tensor* find(const std::string& name) const {
    for (const Tensor& t : tensors) if (t.name == name) return &t;
    return nullptr;
  }
  Tensor* find(const std::string& name) {
    for (Tensor& t : tensors) if (t.name == name) return &t;
    return nullptr;
  }
  const Tensor& at(const std::string& name) const {
    if (const Tensor* t = find(name)) return *t;
    throw Error("no tensor named '" + name + "'");
  }
  Tensor& at(const std::string& name) {
    if (Tensor* t = find(name)) return *t;
    throw Error("no tensor named '" + name + "'");
  }
  size_t size() const { return tensors.size(); }
};

inline void BufferPool::recycle(TensorSet&& set) {
  for (Tensor& t : set.tensors) recycle(std::move(t.bytes));
  set.tensors.clear();
}

// Limits that keep a hostile header from asking for absurd work; real tensors are far smaller.
constexpr uint32_t kMaxRank = 16;

namespace detail {

class File {
 public:
  File(const std::string& path, const char* mode) : f_(std::fopen(path.c_str(), mode)) {}
  ~File() { if (f_) std::fclose(f_); }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  std::FILE* get() const { return f_; }
  int close() { int rc = std::fclose(f_); f_ = nullptr; return rc; }

 private:
  std::FILE* f_;
};

inline std::string errnoText() { return std::strerror(errno); }

// Reads exactly n bytes, never past the size the file had when it was opened.
struct Reader {
  std::FILE* f;
  uint64_t remaining;
  const std::string& path;

  void read(void* dst, uint64_t n, const char* what) {
    if (n > remaining)
      throw Error(path + ": truncated: " + what + " needs " + std::to_string(n) + " bytes, " +
                  std::to_string(remaining) + " left in the file");
    if (n && std::fread(dst, 1, n, f) != n) throw Error(path + ": read error in " + what);
    remaining -= n;
  }
  template <class T> T scalar(const char* what) {
    unsigned char b[sizeof(T)];
    read(b, sizeof(T), what);
    T v = 0;
    for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(b[i]) << (8 * i);
    return v;
  }
};

template <class T> void putScalar(std::string& out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace detail

// Reads and fully validates a file: every size claimed by a header is checked against the bytes
// actually left in the file before anything is allocated, so a hostile file cannot make the
// reader allocate more than the file's own size.
inline TensorSet readAkt(const std::string& path) {
  detail::File file(path, "rb");
  if (!file.get()) throw Error("cannot open " + path + ": " + detail::errnoText());
  struct stat st {};
  if (fstat(fileno(file.get()), &st) != 0) throw Error("cannot stat " + path + ": " + detail::errnoText());
  if (!S_ISREG(st.st_mode)) throw Error(path + " is not a regular file");
  detail::Reader r{file.get(), static_cast<uint64_t>(st.st_size), path};

  char magic[4];
  r.read(magic, 4, "magic");
  if (std::memcmp(magic, "AKT1", 4) != 0) throw Error(path + ": bad magic (not an AKT1 file)");
  uint32_t count = r.scalar<uint32_t>("tensor count");
  // Smallest possible tensor record: name length + dtype + rank = 4 bytes.
  if (count > r.remaining / 4)
    throw Error(path + ": claims " + std::to_string(count) + " tensors, more than the file can hold");

  TensorSet set;
  for (uint32_t i = 0; i < count; ++i) {
    std::string where = path + ": tensor " + std::to_string(i);
    uint16_t nameLen = r.scalar<uint16_t>("name length");
    std::string name(nameLen, '\0');
    r.read(name.data(), nameLen, "name");
    uint8_t code = r.scalar<uint8_t>("dtype");
    if (!validDType(code)) throw Error(where + " ('" + name + "'): invalid dtype code " + std::to_string(code));
    uint8_t rank = r.scalar<uint8_t>("rank");
    if (rank > kMaxRank) throw Error(where + " ('" + name + "'): rank " + std::to_string(rank) + " exceeds " + std::to_string(kMaxRank));
    Tensor t;
    t.name = name;
    t.dtype = static_cast<DType>(code);
    uint64_t bytes = dtypeSize(t.dtype);
    for (uint8_t d = 0; d < rank; ++d) {
      uint64_t dim = r.scalar<uint64_t>("dims");
      t.dims.push_back(dim);
      if (dim != 0 && bytes > r.remaining / dim)
        throw Error(where + " ('" + name + "'): truncated: shape " + t.shapeString() + "... needs more than the " +
                    std::to_string(r.remaining) + " bytes left in the file");
      bytes *= dim;
    }
    if (bytes > r.remaining)
      throw Error(where + " ('" + name + "'): truncated: shape " + t.shapeString() + " needs " + std::to_string(bytes) +
                  " bytes, " + std::to_string(r.remaining) + " left in the file");
    t.bytes = Buffer::uninitialized(bytes);
    r.read(t.bytes.data(), bytes, "data");
    if (set.find(name)) throw Error(where + ": duplicate tensor name '" + name + "'");
    set.tensors.push_back(std::move(t));
  }
  if (r.remaining != 0) throw Error(path + ": " + std::to_string(r.remaining) + " trailing bytes after the last tensor");
  return set;
}

inline void writeAkt(const std::string& path, const TensorSet& set) {
  detail::File file(path, "wb");
  if (!file.get()) throw Error("cannot create " + path + ": " + detail::errnoText());
  std::string head = "AKT1";
  detail::putScalar<uint32_t>(head, static_cast<uint32_t>(set.tensors.size()));
  bool ok = std::fwrite(head.data(), 1, head.size(), file.get()) == head.size();
  for (const Tensor& t : set.tensors) {
    if (t.name.size() > 0xffff) throw Error(path + ": tensor name longer than 65535 bytes");
    if (t.dims.size() > kMaxRank) throw Error(path + ": tensor '" + t.name + "' has rank above 16");
    if (t.bytes.size() != t.elements() * dtypeSize(t.dtype))
      throw Error(path + ": tensor '" + t.name + "' holds " + std::to_string(t.bytes.size()) +
                  " bytes, its shape " + t.shapeString() + " needs " + std::to_string(t.elements() * dtypeSize(t.dtype)));
    std::string h;
    detail::putScalar<uint16_t>(h, static_cast<uint16_t>(t.name.size()));
    h += t.name;
    h.push_back(static_cast<char>(t.dtype));
    h.push_back(static_cast<char>(t.dims.size()));
    for (uint64_t d : t.dims) detail::putScalar<uint64_t>(h, d);
    ok = ok && std::fwrite(h.data(), 1, h.size(), file.get()) == h.size();
    ok = ok && (t.bytes.size() == 0 || std::fwrite(t.bytes.data(), 1, t.bytes.size(), file.get()) == t.bytes.size());
  }
  if (!ok) throw Error("cannot write " + path + ": " + detail::errnoText());
  if (file.close() != 0) throw Error("cannot write " + path + ": " + detail::errnoText());
}

// IEEE half and bfloat16 conversions (no F16C dependency: the checker runs everywhere).
inline float halfToFloat(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu;
  float v;
  if (exp == 0) v = std::ldexp(static_cast<float>(mant), -24);
  else if (exp == 31) v = mant ? NAN : INFINITY;
  else v = std::ldexp(static_cast<float>(mant | 0x400u), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}

inline uint16_t floatToHalf(float f) {  // round to nearest even
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  if (std::isnan(f)) return sign | 0x7e00u;
  float a = std::fabs(f);
  if (a >= 65520.0f) return sign | 0x7c00u;
  if (a < std::ldexp(1.0f, -14)) {  // subnormal: units of 2^-24
    return sign | static_cast<uint16_t>(std::nearbyint(std::ldexp(a, 24)));
  }
  int e;
  float m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  uint32_t mant = static_cast<uint32_t>(std::nearbyint(std::ldexp(m, 11)));  // 1024..2048
  if (mant == 2048) { mant = 1024; ++e; }
  uint32_t exp = static_cast<uint32_t>(e - 1 + 15);
  if (exp >= 31) return sign | 0x7c00u;
  return sign | static_cast<uint16_t>((exp << 10) | (mant & 0x3ffu));
}

inline float bf16ToFloat(uint16_t b) {
  uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

inline uint16_t floatToBf16(float f) {  // round to nearest even
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace akt
