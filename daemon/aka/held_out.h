#pragma once
// Held-out shapes for imported AKA tasks (docs/aka.md, "Held-out shapes"). AKA keeps them out of
// its repository, one `held_out_tests/<task name>/held_out_shapes.yaml` per task, each a list of
// textual injections into the task's files:
//
//   injections:
//     - file: scripts/task_runner.py
//       find_marker: TEST_SHAPES            # replace the `TEST_SHAPES = [...]` list
//       replacement_code: "TEST_SHAPES = [(3, 5), ...]"
//     - file: pytorch_code_module/py_x.py
//       find_marker: "def get_inputs():"    # replace the get_inputs function
//       replacement_code: "def get_inputs(): ..."
//     - file: test_x.py
//       find_marker: raw_replace            # replace the first occurrence of old_code
//       old_code: "@pytest.mark.parametrize(...)"
//       replacement_code: "@pytest.mark.parametrize(...)"
//
// akad reads them at import (`--held-out DIR`), checks that each applies to the pristine task,
// and keeps them beside the task where only the scorer reads them; the agent never sees them.

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace akad::aka {

struct Injection {
  std::string file;         // relative to the task folder
  std::string marker;       // "TEST_SHAPES" | "def get_inputs..." | "raw_replace"
  std::string replacement;  // replacement_code
  std::string old_code;     // raw_replace only
};

// Validates a held_out_shapes.yaml; `where` names it in messages.
Result<std::vector<Injection>> parseHeldOutShapes(const std::string& yamlText, const std::string& where);

// The source with one injection applied; an Error when its target is not found or nothing would
// change (a held-out set that changes nothing would report the visible shapes as held-out).
Result<std::string> applyInjection(const std::string& source, const Injection& injection);

// Applies every injection to the files under `workspace`, in order.
Status applyInjections(const std::filesystem::path& workspace, const std::vector<Injection>& injections);

nlohmann::json injectionsToJson(const std::vector<Injection>& injections);

// The held-out choice of a task version (which of akad's generated shapes or cases the pristine
// baseline passes, wrap and convert mode alike): recorded beside the version's trusted caches
// (<trusted cache>/<hash>/aka-held-out-kept.json), or in the scoring's folder when it keeps none.
std::filesystem::path heldOutChoiceFile(const std::filesystem::path& trustedCache, const std::string& taskHash,
                                        const std::filesystem::path& workDir);
// The recorded choice, if there is one ({"kept": [...], "dropped": [...]}).
std::optional<nlohmann::json> readHeldOutChoice(const std::filesystem::path& file);
// Records it whole or not at all (written aside, then renamed); a failure only costs the next
// scoring the choice again.
void recordHeldOutChoice(const std::filesystem::path& file, const nlohmann::json& choice);
Result<std::vector<Injection>> injectionsFromJson(const nlohmann::json& j);

}  // namespace akad::aka
