// common/time_text.h: the one form akad writes times in, and its one reader.
#include "common/time_text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <ctime>

namespace akad {
namespace {

TEST(TimeText, AKnownTimeReadsBackToItsSecondsAndMilliseconds) {
  auto t = parseIsoTimeUtc("2026-12-02T15:40:01.123Z");
  ASSERT_TRUE(t);
  // 2026-12-02 is day 20789 since 1970-01-01.
  EXPECT_NEAR(*t, 20789.0 * 86400 + 15 * 3600 + 40 * 60 + 1 + 0.123, 1e-6);
  EXPECT_NEAR(*parseIsoTimeUtc("1970-01-01T00:00:00.000Z"), 0, 1e-9);
}

TEST(TimeText, WhatIsWrittenNowReadsBackAsNow) {
  const double before = static_cast<double>(std::time(nullptr));
  auto t = parseIsoTimeUtc(isoTimeUtc());
  ASSERT_TRUE(t);
  EXPECT_GE(*t, before - 0.001);
  EXPECT_LE(*t, before + 2);
}

TEST(TimeText, SecondsAgoMoveTheTimeBackAndNegativeOnesForward) {
  const double now = *parseIsoTimeUtc(isoTimeUtc());
  EXPECT_NEAR(*parseIsoTimeUtc(isoTimeUtc(3600.5)), now - 3600.5, 1.0);
  const std::string future = isoTimeUtc(-60.75);
  ASSERT_TRUE(parseIsoTimeUtc(future)) << future;  // milliseconds stay below 1000
  EXPECT_NEAR(*parseIsoTimeUtc(future), now + 60.75, 1.0);
}

TEST(TimeText, TextOrderIsTimeOrder) {
  const std::string earlier = isoTimeUtc(90000), later = isoTimeUtc(1);
  EXPECT_LT(earlier, later);
  EXPECT_LT(*parseIsoTimeUtc(earlier), *parseIsoTimeUtc(later));
}

TEST(TimeText, AnythingButTheOneFormIsRefused) {
  for (const char* bad : {"", "2026-12-02T15:40:01Z", "2026-12-02 15:40:01.123Z", "2026-12-02T15:40:01.123+01:00",
                          "2026-12-02T15:40:01.1234Z", "2026-13-02T15:40:01.123Z", "2026-02-30T15:40:01.123Z",
                          "2026-12-02T24:00:00.000Z", "2026-12-02T15:60:00.000Z", "2026-12-0xT15:40:01.123Z",
                          "1969-12-31T23:59:59.999Z"})
    EXPECT_FALSE(parseIsoTimeUtc(bad)) << bad;
}

}  // namespace
}  // namespace akad
