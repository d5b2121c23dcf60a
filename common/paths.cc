#include "common/paths.h"

#include <unistd.h>

#include <cstdlib>

#include "akad/version.h"

namespace akad {
namespace {
std::string envOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? std::string(v) : fallback;
}
}  // namespace

std::filesystem::path defaultSocketPath() {
  if (const char* v = std::getenv("AKAD_SOCKET"); v != nullptr && *v != '\0') return v;
  if (::geteuid() == 0) return "/run/akad/akad.sock";
  std::string runtime = envOr("XDG_RUNTIME_DIR", "/tmp/akad-" + std::to_string(::geteuid()));
  return std::filesystem::path(runtime) / "akad.sock";
}

std::filesystem::path defaultStateDir() {
  if (::geteuid() == 0) return "/var/lib/akad";
  std::string state = envOr("XDG_STATE_HOME", envOr("HOME", "/tmp") + "/.local/state");
  return std::filesystem::path(state) / "akad";
}


}  // namespace akad
