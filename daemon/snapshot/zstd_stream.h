#pragma once
// zstd framing for snapshot archives, done with libzstd directly rather than libarchive's zstd
// filter: compression runs in zstd's own worker threads (the tar formatting and hashing stay on
// the caller's thread), and decompression counts the compressed bytes consumed so the extractor
// can enforce a compression-ratio limit against the bytes it has actually read.

#include <zstd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/sha256.h"

namespace akad::snapshot {

inline constexpr int kZstdLevel = 3;

// Compresses a byte stream into an open file descriptor, hashing the compressed bytes as they
// are written. The output depends only on the input bytes (zstd's multithreaded format does not
// depend on the worker count), which the determinism tests check.
class ZstdFileSink {
 public:
  explicit ZstdFileSink(int fd, int level = kZstdLevel);
  ~ZstdFileSink();
  ZstdFileSink(const ZstdFileSink&) = delete;
  ZstdFileSink& operator=(const ZstdFileSink&) = delete;

  Status write(const void* data, size_t size);
  Status finish();  // ends the frame; the hash and size are final afterwards

  uint64_t inputBytes() const { return inputBytes_; }
  uint64_t outputBytes() const { return outputBytes_; }
  std::string sha256() { return hash_.hexDigest(); }

  static int workerCount();

 private:
  Status drain(ZSTD_inBuffer& in, ZSTD_EndDirective mode);
  Status flushOut(size_t n);

  int fd_;
  ZSTD_CCtx* cctx_;
  std::vector<char> out_;
  Sha256 hash_;
  uint64_t inputBytes_ = 0;
  uint64_t outputBytes_ = 0;
  bool finished_ = false;
};

// Decompresses a file descriptor on demand. Any number of concatenated frames is accepted; the
// stream must end on a frame boundary (a truncated archive is an error, not a short tree).
class ZstdFileSource {
 public:
  explicit ZstdFileSource(int fd);
  ~ZstdFileSource();
  ZstdFileSource(const ZstdFileSource&) = delete;
  ZstdFileSource& operator=(const ZstdFileSource&) = delete;

  // Next chunk of decompressed bytes: size 0 at the clean end of the stream.
  Result<std::pair<const char*, size_t>> next();

  uint64_t compressedConsumed() const { return compressedConsumed_; }
  uint64_t decompressedProduced() const { return decompressedProduced_; }
  uint64_t fileBytesRead() const { return fileBytesRead_; }
  // Hash every byte read from the file into `h` (must outlive this source).
  void hashInto(Sha256* h) { hash_ = h; }

 private:
  int fd_;
  ZSTD_DCtx* dctx_;
  std::vector<char> in_;
  std::vector<char> out_;
  ZSTD_inBuffer inBuf_{nullptr, 0, 0};
  bool eof_ = false;
  size_t lastRet_ = 0;  // 0 when the last frame was complete
  bool sawInput_ = false;
  uint64_t compressedConsumed_ = 0;
  uint64_t decompressedProduced_ = 0;
  uint64_t fileBytesRead_ = 0;
  Sha256* hash_ = nullptr;
};

}  // namespace akad::snapshot
