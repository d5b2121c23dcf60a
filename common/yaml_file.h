#pragma once
// Reads a YAML file given by a user or an operator (task.yaml, agent definitions, the tenant
// policy): a regular file of at most 1 MiB, parsed whole. Anything else is an Error naming the
// file; nothing here throws (yaml-cpp's LoadFile throws std::ios_failure on a directory, which
// no YAML::Exception handler catches).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <yaml-cpp/yaml.h>

#include "common/result.h"

namespace akad {

inline Result<YAML::Node> loadYamlFile(const std::filesystem::path& file, std::size_t maxBytes = 1 << 20) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return errnoError(file.string() + ": cannot read the file");
  struct stat st {};
  std::string text;
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  if (regular && static_cast<std::size_t>(st.st_size) <= maxBytes) {
    text.resize(static_cast<std::size_t>(st.st_size) + 1);
    std::size_t got = 0;
    for (ssize_t n; got < text.size() && (n = ::read(fd, text.data() + got, text.size() - got)) > 0;)
      got += static_cast<std::size_t>(n);
    text.resize(got);
  }
  ::close(fd);
  if (!regular) return Error{file.string() + ": not a regular file"};
  if (static_cast<std::size_t>(st.st_size) > maxBytes || text.size() > maxBytes)
    return Error{file.string() + ": larger than " + std::to_string(maxBytes) + " bytes"};
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Error{file.string() + ": not valid YAML: " + e.what()};
  } catch (const std::exception& e) {
    return Error{file.string() + ": cannot be read as YAML: " + e.what()};
  }
}

}  // namespace akad
