#include "common/log.h"

#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <ctime>
#include <mutex>

#include "common/time_text.h"

namespace akad::log {
namespace {
std::atomic<Level> g_level{Level::Info};
std::mutex g_mutex;

const char* levelName(Level l) {
  switch (l) {
    case Level::Debug: return "DEBUG";
    case Level::Info: return "INFO ";
    case Level::Warn: return "WARN ";
    case Level::Error: return "ERROR";
  }
  return "?";
}
}  // namespace

void setLevel(Level l) { g_level = l; }
Level level() { return g_level; }

bool parseLevel(std::string_view text, Level& out) {
  if (text == "debug") out = Level::Debug;
  else if (text == "info") out = Level::Info;
  else if (text == "warn" || text == "warning") out = Level::Warn;
  else if (text == "error") out = Level::Error;
  else return false;
  return true;
}

void write(Level l, std::string_view message) {
  const std::string stamp = isoTimeUtc();
  std::lock_guard lock(g_mutex);
  std::fprintf(stderr, "%s %s %.*s\n", stamp.c_str(), levelName(l), static_cast<int>(message.size()),
               message.data());
}

}  // namespace akad::log
