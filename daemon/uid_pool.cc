#include "daemon/uid_pool.h"

#include <fstream>
#include <vector>

namespace akad {

std::string UidRange::text() const {
  return std::to_string(first) + "-" + std::to_string(static_cast<unsigned long>(first) + count - 1);
}

Result<UidRange> parseUidRange(const std::string& text) {
  const auto dash = text.find('-');
  auto number = [](const std::string& s) -> std::optional<unsigned long> {
    if (s.empty() || s.size() > 10 || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    const unsigned long v = std::stoul(s);
    if (v < 1 || v > 4294967294ul) return std::nullopt;
    return v;
  };
  const auto first = number(text.substr(0, dash));
  const auto last = dash == std::string::npos ? std::nullopt : number(text.substr(dash + 1));
  if (!first || !last || *last < *first)
    return Error{"a uid range is FIRST-LAST with 1 <= FIRST <= LAST <= 4294967294, got '" + text + "'"};
  return UidRange{static_cast<uid_t>(*first), static_cast<uid_t>(*last - *first + 1)};
}

std::vector<std::string> subordinateOverlaps(const std::filesystem::path& file, const UidRange& range, uid_t uid) {
  std::vector<std::string> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    const auto a = line.find(':');
    const auto b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    unsigned long first = 0, count = 0;
    try {
      first = std::stoul(line.substr(a + 1, b - a - 1));
      count = std::stoul(line.substr(b + 1));
    } catch (const std::exception&) {
      continue;
    }
    const unsigned long end = first + count;  // exclusive
    const unsigned long rFirst = range.first, rEnd = rFirst + range.count;
    const bool meetsRange = range.count > 0 && first < rEnd && rFirst < end;
    const bool holdsUid = uid >= first && uid < end;
    if (meetsRange || holdsUid) out.push_back(line);
  }
  return out;
}

std::optional<uid_t> UidPool::acquire() {
  std::lock_guard lock(mutex_);
  for (uid_t i = 0; i < range_.count; ++i) {
    const uid_t uid = range_.first + i;
    if (taken_.insert(uid).second) return uid;
  }
  return std::nullopt;
}

bool UidPool::take(uid_t uid) {
  std::lock_guard lock(mutex_);
  return range_.contains(uid) && taken_.insert(uid).second;
}

void UidPool::release(uid_t uid) {
  std::lock_guard lock(mutex_);
  taken_.erase(uid);
}

std::size_t UidPool::inUse() const {
  std::lock_guard lock(mutex_);
  return taken_.size();
}

}  // namespace akad
