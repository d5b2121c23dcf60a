#pragma once
// Held-out cases of converted AKA tasks (docs/aka.md, "Held-out cases (convert mode)"). The
// importer makes them from the text of the visible cases, the elements of the list AKA's
// get_inputs() loops over: cases of the same form (the same text once every integer literal
// is taken out) are one group; a number that every case of a group shares is a constraint of
// the model (a feature count the module was built with, a dimension index) and stays; the
// numbers that vary are sizes, and numbers that are equal in every case of the group (the
// batch of `x` and of `y`) stay equal. The sizes get held_out_rules's rules (prime, scaled up,
// scaled down, another aspect ratio). The scorer keeps a generated case only where the
// pristine baseline passes it, decided once per task version; the agent never sees them.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "daemon/pipeline/gate_runner.h"

namespace akad::aka {

struct HeldOutCase {
  std::string text;  // a case-list element, in the visible cases' form
  std::string rule;  // "prime" | "scaled-up" | "scaled-down" | "aspect"
};

// At most `max` cases made from the visible ones, none of them visible, groups taken in turn.
// Deterministic.
std::vector<HeldOutCase> heldOutCases(const std::vector<std::string>& visible, std::size_t max = 6);

// The held-out configurations of the converted task `g.task()` that the pristine baseline (the
// program of `trustedDir`) passes on the GPU: first all at once, then, if that run failed as a
// whole, each alone. Kept beside the trusted caches (`cacheFile`), so later scorings of the
// same task version read the choice, unless it was made on a GPU other scorings shared
// (ScoringEnvironment::gpu_shared: a case may have failed for want of their memory).
// `choice` gets {"kept": [names], "dropped": [{name, rule, reason}]}. The scoring's plans
// folder must hold its tolerances.json already.
Result<std::vector<nlohmann::json>> keptHeldOutConfigs(const GateRunner& g, const std::filesystem::path& trustedDir,
                                                       const std::filesystem::path& cacheFile,
                                                       const std::function<uint64_t()>& seed, nlohmann::json& choice);

}  // namespace akad::aka
