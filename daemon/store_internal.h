#pragma once
// What store.cc, store_schema.cc and store_attempts.cc share; not part of the store's interface.

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "daemon/store.h"

namespace akad {

// JSON as stored in a TEXT column (invalid UTF-8 replaced rather than thrown on).
std::string dumpJson(const nlohmann::json& j);
void addToCounts(AttemptCounts& c, std::string_view state, std::int64_t n);

}  // namespace akad
