#include "daemon/snapshot/zstd_stream.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <stdexcept>
#include <thread>

namespace akad::snapshot {

namespace {
Error zstdError(const std::string& what, size_t code) {
  return Error{what + ": " + ZSTD_getErrorName(code), 0};
}
}  // namespace

int ZstdFileSink::workerCount() {
  if (const char* env = std::getenv("AKAD_SNAPSHOT_ZSTD_WORKERS")) return std::clamp(std::atoi(env), 1, 64);
  unsigned hw = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp(hw, 1u, 8u));
}

ZstdFileSink::ZstdFileSink(int fd, int level) : fd_(fd), cctx_(ZSTD_createCCtx()), out_(ZSTD_CStreamOutSize() * 8) {
  if (cctx_ == nullptr) throw std::runtime_error("cannot allocate a zstd compression context");
  ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(cctx_, ZSTD_c_checksumFlag, 1);
  // Always at least one worker: the multithreaded frame layout is the same for any worker count
  // but differs from the single-threaded one, so the archive bytes would otherwise depend on the
  // machine. A libzstd built without threads rejects this and we stay single-threaded.
  ZSTD_CCtx_setParameter(cctx_, ZSTD_c_nbWorkers, workerCount());
}

ZstdFileSink::~ZstdFileSink() { ZSTD_freeCCtx(cctx_); }

Status ZstdFileSink::flushOut(size_t n) {
  const char* p = out_.data();
  size_t left = n;
  while (left > 0) {
    ssize_t w = ::write(fd_, p, left);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errnoError("cannot write the archive");
    }
    p += w;
    left -= static_cast<size_t>(w);
  }
  hash_.update(out_.data(), n);
  outputBytes_ += n;
  return {};
}

Status ZstdFileSink::drain(ZSTD_inBuffer& in, ZSTD_EndDirective mode) {
  for (;;) {
    ZSTD_outBuffer out{out_.data(), out_.size(), 0};
    size_t rem = ZSTD_compressStream2(cctx_, &out, &in, mode);
    if (ZSTD_isError(rem)) return zstdError("zstd compression failed", rem);
    if (out.pos > 0)
      if (auto st = flushOut(out.pos); !st) return st;
    bool done = mode == ZSTD_e_continue ? in.pos == in.size : rem == 0;
    if (done) return {};
  }
}

Status ZstdFileSink::write(const void* data, size_t size) {
  ZSTD_inBuffer in{data, size, 0};
  inputBytes_ += size;
  return drain(in, ZSTD_e_continue);
}

Status ZstdFileSink::finish() {
  if (finished_) return {};
  finished_ = true;
  ZSTD_inBuffer in{nullptr, 0, 0};
  return drain(in, ZSTD_e_end);
}

ZstdFileSource::ZstdFileSource(int fd)
    : fd_(fd), dctx_(ZSTD_createDCtx()), in_(1 << 20), out_(1 << 20) {
  if (dctx_ == nullptr) throw std::runtime_error("cannot allocate a zstd decompression context");
  // Bounded window (the default 128 MiB): a hostile frame cannot make us allocate more.
  ZSTD_DCtx_setParameter(dctx_, ZSTD_d_windowLogMax, 27);
}

ZstdFileSource::~ZstdFileSource() { ZSTD_freeDCtx(dctx_); }

Result<std::pair<const char*, size_t>> ZstdFileSource::next() {
  for (;;) {
    if (inBuf_.pos == inBuf_.size && !eof_) {
      ssize_t n = ::read(fd_, in_.data(), in_.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return errnoError("cannot read the archive");
      }
      if (n == 0) {
        eof_ = true;
      } else {
        inBuf_ = ZSTD_inBuffer{in_.data(), static_cast<size_t>(n), 0};
        fileBytesRead_ += static_cast<uint64_t>(n);
        if (hash_ != nullptr) hash_->update(in_.data(), static_cast<size_t>(n));
        sawInput_ = true;
      }
    }
    if (inBuf_.pos == inBuf_.size && eof_) {
      if (!sawInput_) return Error{"archive is empty (not a zstd stream)", 0};
      if (lastRet_ != 0) return Error{"archive is truncated: the zstd stream ends inside a frame", 0};
      return std::pair<const char*, size_t>{out_.data(), 0};
    }
    ZSTD_outBuffer out{out_.data(), out_.size(), 0};
    size_t before = inBuf_.pos;
    size_t ret = ZSTD_decompressStream(dctx_, &out, &inBuf_);
    if (ZSTD_isError(ret)) return zstdError("archive is corrupt (zstd)", ret);
    compressedConsumed_ += inBuf_.pos - before;
    lastRet_ = ret;
    if (out.pos > 0) {
      decompressedProduced_ += out.pos;
      return std::pair<const char*, size_t>{out_.data(), out.pos};
    }
  }
}

}  // namespace akad::snapshot
