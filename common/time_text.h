#pragma once
// Times as akad writes them everywhere (store, logs, audit, network logs):
// "2026-12-02T15:40:01.123Z", UTC, milliseconds. Text order is time order.
#include <sys/time.h>

#include <cstdio>
#include <ctime>
#include <string>

namespace akad {

// The time `secondsAgo` before now (0: now).
inline std::string isoTimeUtc(double secondsAgo = 0) {
  timeval tv{};
  ::gettimeofday(&tv, nullptr);
  const auto whole = static_cast<time_t>(secondsAgo);
  tv.tv_sec -= whole;
  tv.tv_usec -= static_cast<suseconds_t>((secondsAgo - static_cast<double>(whole)) * 1e6);
  if (tv.tv_usec < 0) {
    tv.tv_usec += 1000000;
    tv.tv_sec -= 1;
  }
  tm t{};
  ::gmtime_r(&tv.tv_sec, &t);
  char s[64];
  std::snprintf(s, sizeof s, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", t.tm_year + 1900, t.tm_mon + 1, t.tm_mday,
                t.tm_hour, t.tm_min, t.tm_sec, static_cast<long>(tv.tv_usec / 1000));
  return s;
}

}  // namespace akad
