#include "daemon/aka/helpers.h"

namespace akad::aka {

Result<std::string> fillHelperRegion(const std::string& runner, const std::string& helperSource) {
  const std::size_t anchor = helperSource.find("def _measure_cuda_event_fallback(");
  if (anchor == std::string::npos)
    return Error{std::string(kVllmHelperSource) + " has no _measure_cuda_event_fallback to fill in"};
  std::string block = helperSource.substr(anchor);
  if (!block.empty() && block.back() != '\n') block += '\n';
  const std::size_t start = runner.find(kMarkStart);
  if (start == std::string::npos) return Error{"no AKA-GENERATED start marker"};
  const std::size_t afterStart = runner.find('\n', start);
  if (afterStart == std::string::npos) return Error{"the AKA-GENERATED start marker ends the file"};
  const std::size_t end = runner.find(kMarkEnd, afterStart);
  if (end == std::string::npos) return Error{"no AKA-GENERATED end marker after the start marker"};
  return runner.substr(0, afterStart + 1) + block + runner.substr(end);
}

}  // namespace akad::aka
