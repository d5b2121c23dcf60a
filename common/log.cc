#include "common/log.h"

#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <ctime>
#include <mutex>

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
  timeval tv{};
  gettimeofday(&tv, nullptr);
  tm t{};
  gmtime_r(&tv.tv_sec, &t);
  char stamp[64];
  std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", t.tm_year + 1900,
                t.tm_mon + 1, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, tv.tv_usec / 1000);
  std::lock_guard lock(g_mutex);
  std::fprintf(stderr, "%s %s %.*s\n", stamp, levelName(l), static_cast<int>(message.size()),
               message.data());
}

}  // namespace akad::log
