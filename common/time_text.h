#pragma once
// Times as akad writes them everywhere (store, logs, audit, network logs, the node's result):
// "2026-12-02T15:40:01.123Z", UTC, milliseconds. Text order is time order. The one place that
// writes this form and the one that reads it back.
#include <sys/time.h>

#include <cstdio>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>

namespace akad {

// The time `secondsAgo` before now (0: now; negative: in the future).
inline std::string isoTimeUtc(double secondsAgo = 0) {
  timeval tv{};
  ::gettimeofday(&tv, nullptr);
  const auto whole = static_cast<time_t>(secondsAgo);
  tv.tv_sec -= whole;
  tv.tv_usec -= static_cast<suseconds_t>((secondsAgo - static_cast<double>(whole)) * 1e6);
  if (tv.tv_usec < 0) {
    tv.tv_usec += 1000000;
    tv.tv_sec -= 1;
  } else if (tv.tv_usec >= 1000000) {
    tv.tv_usec -= 1000000;
    tv.tv_sec += 1;
  }
  tm t{};
  ::gmtime_r(&tv.tv_sec, &t);
  char s[64];
  std::snprintf(s, sizeof s, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", t.tm_year + 1900, t.tm_mon + 1, t.tm_mday,
                t.tm_hour, t.tm_min, t.tm_sec, static_cast<long>(tv.tv_usec / 1000));
  return s;
}

// Seconds since the epoch of a time in exactly isoTimeUtc's form; nullopt for anything else
// (another layout, a zone other than Z, a field out of range).
inline std::optional<double> parseIsoTimeUtc(std::string_view text) {
  if (text.size() != 24 || text[4] != '-' || text[7] != '-' || text[10] != 'T' || text[13] != ':' ||
      text[16] != ':' || text[19] != '.' || text[23] != 'Z')
    return std::nullopt;
  auto digits = [&](std::size_t at, std::size_t n) -> int {
    int v = 0;
    for (std::size_t i = at; i < at + n; ++i) {
      if (text[i] < '0' || text[i] > '9') return -1;
      v = v * 10 + (text[i] - '0');
    }
    return v;
  };
  tm t{};
  const int year = digits(0, 4), month = digits(5, 2), day = digits(8, 2), hour = digits(11, 2), minute = digits(14, 2),
            second = digits(17, 2), millis = digits(20, 3);
  if (year < 1970 || month < 1 || month > 12 || day < 1 || day > 31 || hour < 0 || hour > 23 || minute < 0 ||
      minute > 59 || second < 0 || second > 59 || millis < 0)
    return std::nullopt;
  t.tm_year = year - 1900;
  t.tm_mon = month - 1;
  t.tm_mday = day;
  t.tm_hour = hour;
  t.tm_min = minute;
  t.tm_sec = second;
  const time_t whole = ::timegm(&t);
  // timegm normalises (February 30th becomes March 2nd): such a day was not a real one.
  if (t.tm_mday != day || t.tm_mon != month - 1) return std::nullopt;
  return static_cast<double>(whole) + millis / 1000.0;
}

}  // namespace akad
