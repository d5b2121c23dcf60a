#pragma once
// Timestamped, levelled logging to stderr: "2026-11-30T03:40:00.123Z INFO  message".

#include <sstream>
#include <string>
#include <string_view>

namespace akad::log {

enum class Level { Debug = 0, Info = 1, Warn = 2, Error = 3 };

void setLevel(Level level);
Level level();
// Parses "debug|info|warn|error"; false if unknown.
bool parseLevel(std::string_view text, Level& out);
void write(Level level, std::string_view message);

template <class... Args>
void at(Level lvl, const Args&... args) {
  if (lvl < level()) return;
  std::ostringstream os;
  (os << ... << args);
  write(lvl, os.str());
}

template <class... Args> void debug(const Args&... a) { at(Level::Debug, a...); }
template <class... Args> void info(const Args&... a) { at(Level::Info, a...); }
template <class... Args> void warn(const Args&... a) { at(Level::Warn, a...); }
template <class... Args> void error(const Args&... a) { at(Level::Error, a...); }

}  // namespace akad::log
