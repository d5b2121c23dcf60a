#pragma once
// The trust mapping of an imported AKA task (docs/aka.md, "Trust mapping"): which files the
// agent may edit, and how the scorer's workspace is rebuilt from the pristine task folder plus
// only those files. AKA itself protects its harness by file-name patterns in the folder the
// agent edits; here everything outside the mapping is taken from the pristine copy and the
// agent's changes to it are listed and ignored.

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "daemon/aka/config.h"

namespace akad::aka {

enum class Family {
  Hip2Hip,          // hip2hip/*: the agent edits source_file_path (the .hip kernel)
  Torch2Hip,        // torch2hip/*: only target_file_path (the .hip); never the PyTorch reference
  TritonRocmbench,  // triton2triton/rocmbench: kernel and pytest tests in one file; only the
                    // target_kernel_functions definitions are taken, spliced into the pristine file
  Triton,           // other triton2triton (vllm, geak_eval): source_file_path
  Other,            // a task type akad does not import
};
Family familyOf(const std::string& taskName, const AkaTaskConfig& config);
std::string familyName(Family f);

struct TrustMapping {
  std::vector<std::string> editable;          // files whose agent version the scorer takes
  std::vector<std::string> splice_functions;  // non-empty: take only these top-level defs of `editable`
};
// Error when the config lacks what the family's mapping needs (torch2hip's target_file_path,
// rocmbench's target_kernel_functions).
Result<TrustMapping> trustMappingFor(Family family, const AkaTaskConfig& config);

// Offsets of the lines that start a top-level logical line of Python source (column 0, not
// blank, not a comment; strings, brackets and backslash continuations followed).
std::vector<std::size_t> topLevelStatements(const std::string& source);

// Byte range of a top-level Python function definition, its decorators included and trailing
// blank and column-0 comment lines left out. Strings, comments, brackets and backslash
// continuations are followed, so a "def" inside a docstring or a multi-line signature whose
// closing parenthesis sits at column 0 is read right. nullopt when `name` is not defined at
// top level; an Error when it is defined more than once (which one Python keeps depends on
// order, and a splice must not guess).
struct DefSpan {
  std::size_t begin = 0;
  std::size_t end = 0;
};
Result<std::optional<DefSpan>> findTopLevelDef(const std::string& source, const std::string& name);

// The pristine file with each of `functions` replaced by the candidate's definition of it.
// `spliced` gets the functions taken; a function the candidate no longer defines keeps the
// pristine definition and is listed in `kept`. `outsideChanged` tells whether the candidate
// changed anything outside those definitions (ignored, and reported).
struct SpliceResult {
  std::string text;
  std::vector<std::string> spliced;
  std::vector<std::string> kept;
  bool outsideChanged = false;
};
Result<SpliceResult> spliceFunctions(const std::string& pristine, const std::string& candidate,
                                     const std::vector<std::string>& functions);

// The scorer's workspace of a wrapped task: `pristine` (the imported task folder) copied to
// `dest`, then the mapping's files from `candidateTree` (whole, or spliced). Every other change
// of the candidate is listed in `ignored` ("path (changed|added|deleted)"); the files akad
// itself adds to the agent's workspace (PROMPT.md, configs.json, harness/) are not.
struct WrappedWorkspace {
  std::vector<std::string> taken;    // editable files taken whole
  std::vector<std::string> spliced;  // "file: fn" definitions taken from the candidate
  std::vector<std::string> ignored;
};
Result<WrappedWorkspace> assembleWrappedWorkspace(const TrustMapping& mapping, const std::filesystem::path& pristine,
                                                  const std::filesystem::path& candidateTree,
                                                  const std::filesystem::path& dest);

}  // namespace akad::aka
