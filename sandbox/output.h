#pragma once
// The command's stdout and stderr arrive on pipes; akabox copies them to their destinations
// and stops at the output limit, which is shared by both streams.

#include <cstdint>
#include <string>

#include "common/result.h"
#include "common/unique_fd.h"

namespace akad::box {

class OutputCapture {
 public:
  // limit 0: unlimited.
  explicit OutputCapture(uint64_t limit) : limit_(limit) {}

  // Destination: a file path (created/truncated) or, if empty, `fallbackFd` (not owned).
  Status open(const std::string& stdoutPath, const std::string& stderrPath);

  enum class Stream { Out, Err };
  // Reads what is available from `pipeFd` and forwards it. Returns false at EOF.
  bool drain(int pipeFd, Stream s);

  uint64_t stdoutBytes() const { return out_.bytes; }
  uint64_t stderrBytes() const { return err_.bytes; }
  bool truncated() const { return truncated_; }

 private:
  struct Sink {
    UniqueFd owned;
    int fd = -1;
    uint64_t bytes = 0;
  };
  uint64_t limit_;
  bool truncated_ = false;
  Sink out_, err_;
};

}  // namespace akad::box
