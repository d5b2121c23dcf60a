#include "daemon/aka/trust.h"

#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include "common/sha256.h"
#include "daemon/pipeline/files.h"

namespace fs = std::filesystem;

namespace akad::aka {

Family familyOf(const std::string& taskName, const AkaTaskConfig& config) {
  auto under = [&](const std::string& prefix) { return taskName.rfind(prefix + "/", 0) == 0; };
  if (config.task_type == "hip2hip") return Family::Hip2Hip;
  if (config.task_type == "torch2hip") return Family::Torch2Hip;
  if (config.task_type == "triton2triton")
    return under("triton2triton/rocmbench") ? Family::TritonRocmbench : Family::Triton;
  return Family::Other;
}

std::string familyName(Family f) {
  switch (f) {
    case Family::Hip2Hip: return "hip2hip";
    case Family::Torch2Hip: return "torch2hip";
    case Family::TritonRocmbench: return "triton2triton/rocmbench";
    case Family::Triton: return "triton2triton";
    case Family::Other: return "other";
  }
  return "other";
}

Result<TrustMapping> trustMappingFor(Family family, const AkaTaskConfig& c) {
  TrustMapping m;
  switch (family) {
    case Family::Torch2Hip:
      // source_file_path of a torch2hip task names the PyTorch module: the reference the HIP
      // kernel is checked against. The agent writes the kernel only.
      if (c.target_file.empty())
        return Error{"torch2hip needs target_file_path: the HIP file, the only one its agent may edit"};
      m.editable = {c.target_file};
      return m;
    case Family::TritonRocmbench:
      if (c.target_kernel_functions.empty())
        return Error{"a rocmbench task keeps kernel and tests in one file, so target_kernel_functions must name "
                     "the definitions its agent may change"};
      m.editable = c.source_files;
      m.splice_functions = c.target_kernel_functions;
      return m;
    case Family::Hip2Hip:
    case Family::Triton:
      m.editable = c.source_files;
      return m;
    case Family::Other:
      break;
  }
  return Error{"task_type '" + c.task_type + "' has no trust mapping in akad"};
}

std::vector<std::size_t> topLevelStatements(const std::string& s) {
  std::vector<std::size_t> out;
  const std::size_t n = s.size();
  std::string quote;  // the open string's delimiter: ' " ''' """
  int depth = 0;
  bool continued = false, lineStart = true;
  std::size_t i = 0;
  while (i < n) {
    if (lineStart) {
      lineStart = false;
      if (quote.empty() && depth == 0 && !continued) {
        const char c = s[i];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '#' && c != '\f') out.push_back(i);
      }
      continued = false;
    }
    const char c = s[i];
    if (!quote.empty()) {
      if (c == '\\') {
        i += 2;
        continue;
      }
      if (s.compare(i, quote.size(), quote) == 0) {
        i += quote.size();
        quote.clear();
        continue;
      }
      if (c == '\n') {
        if (quote.size() == 1) quote.clear();  // an unterminated one-line string: Python would stop here too
        lineStart = true;
      }
      ++i;
      continue;
    }
    if (c == '#') {
      while (i < n && s[i] != '\n') ++i;
      continue;
    }
    if (c == '"' || c == '\'') {
      quote = s.compare(i, 3, std::string(3, c)) == 0 ? std::string(3, c) : std::string(1, c);
      i += quote.size();
      continue;
    }
    if (c == '(' || c == '[' || c == '{') ++depth;
    else if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
    else if (c == '\\' && i + 1 < n && s[i + 1] == '\n') {
      continued = true;
      lineStart = true;
      i += 2;
      continue;
    } else if (c == '\n') lineStart = true;
    ++i;
  }
  return out;
}

namespace {

// Start of the line that ends just before `end`.
std::size_t lineBefore(const std::string& s, std::size_t end) {
  if (end == 0) return 0;
  std::size_t last = end - 1;
  if (s[last] == '\n') {
    if (last == 0) return 0;
    --last;
  }
  const std::size_t nl = s.rfind('\n', last);
  return nl == std::string::npos ? 0 : nl + 1;
}

bool blankOrColumn0Comment(const std::string& s, std::size_t from, std::size_t to) {
  if (from < to && s[from] == '#') return true;
  for (std::size_t i = from; i < to; ++i)
    if (s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r' && s[i] != '\f') return false;
  return true;
}

bool statementDefines(const std::string& s, std::size_t at, const std::string& name) {
  static const std::regex defRe(R"(^(?:async[ \t]+)?def[ \t]+([A-Za-z_][A-Za-z_0-9]*)[ \t]*\()");
  const std::size_t eol = s.find('\n', at);
  const std::string line = s.substr(at, (eol == std::string::npos ? s.size() : eol) - at);
  std::smatch m;
  return std::regex_search(line, m, defRe) && m[1] == name;
}

}  // namespace

Result<std::optional<DefSpan>> findTopLevelDef(const std::string& s, const std::string& name) {
  const std::vector<std::size_t> stmts = topLevelStatements(s);
  std::optional<DefSpan> found;
  int count = 0;
  for (std::size_t k = 0; k < stmts.size(); ++k) {
    if (!statementDefines(s, stmts[k], name)) continue;
    ++count;
    std::size_t first = k;
    while (first > 0 && s[stmts[first - 1]] == '@') --first;
    DefSpan span{stmts[first], k + 1 < stmts.size() ? stmts[k + 1] : s.size()};
    while (span.end > stmts[k]) {
      const std::size_t ls = lineBefore(s, span.end);
      if (ls <= stmts[k] || !blankOrColumn0Comment(s, ls, span.end)) break;
      span.end = ls;
    }
    found = span;
  }
  if (count > 1) return Error{"'" + name + "' is defined " + std::to_string(count) + " times at top level"};
  return found;
}

Result<SpliceResult> spliceFunctions(const std::string& pristine, const std::string& candidate,
                                     const std::vector<std::string>& functions) {
  SpliceResult r;
  struct Replacement {
    DefSpan at;
    std::string text;
  };
  std::vector<Replacement> intoPristine, intoCandidate;
  for (const std::string& fn : functions) {
    auto p = findTopLevelDef(pristine, fn);
    if (!p) return Error{"the pristine file: " + p.error().message};
    if (!*p) return Error{"the pristine file has no top-level definition of '" + fn + "'"};
    auto c = findTopLevelDef(candidate, fn);
    if (!c || !*c) {  // gone or ambiguous in the candidate: the pristine definition stays
      r.kept.push_back(fn);
      continue;
    }
    intoPristine.push_back({**p, candidate.substr((*c)->begin, (*c)->end - (*c)->begin)});
    intoCandidate.push_back({**c, pristine.substr((*p)->begin, (*p)->end - (*p)->begin)});
    r.spliced.push_back(fn);
  }
  auto apply = [](std::string text, std::vector<Replacement> reps) {
    std::sort(reps.begin(), reps.end(), [](const Replacement& a, const Replacement& b) { return a.at.begin > b.at.begin; });
    for (const auto& rep : reps) text.replace(rep.at.begin, rep.at.end - rep.at.begin, rep.text);
    return text;
  };
  r.text = apply(pristine, intoPristine);
  // The candidate with its target definitions put back to the pristine ones: anything that still
  // differs was changed outside them.
  r.outsideChanged = apply(candidate, intoCandidate) != pristine;
  return r;
}

namespace {

std::set<std::string> regularFiles(const fs::path& root) {
  std::set<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file(ec) && !it->is_symlink(ec)) out.insert(it->path().lexically_relative(root).generic_string());
  return out;
}

// What prepare.cc adds to every agent workspace; not the agent's change.
bool addedByAkad(const std::string& rel) {
  return rel == "PROMPT.md" || rel == "configs.json" || rel.rfind("harness/", 0) == 0;
}

bool sameFile(const fs::path& a, const fs::path& b) {
  auto ha = sha256File(a);
  auto hb = sha256File(b);
  return ha && hb && *ha == *hb;
}

constexpr std::size_t kMaxSplicedFileBytes = 16 << 20;

}  // namespace

Result<WrappedWorkspace> assembleWrappedWorkspace(const TrustMapping& mapping, const fs::path& pristine,
                                                  const fs::path& candidateTree, const fs::path& dest) {
  // Times kept, and each taken file given its pristine file's: a build tool sees the same tree
  // in every scoring, and the build cache (build_cache.h) is keyed by content.
  if (auto s = copyTree(pristine, dest, FileTimes::Kept); !s) return s.error();
  WrappedWorkspace ws;
  const std::set<std::string> editable(mapping.editable.begin(), mapping.editable.end());
  const std::set<std::string> before = regularFiles(pristine);
  const std::set<std::string> after = regularFiles(candidateTree);
  for (const auto& rel : after) {
    if (editable.count(rel) || addedByAkad(rel)) continue;
    if (!before.count(rel)) ws.ignored.push_back(rel + " (added)");
    else if (!sameFile(candidateTree / rel, pristine / rel)) ws.ignored.push_back(rel + " (changed)");
  }
  for (const auto& rel : before)
    if (!after.count(rel) && !editable.count(rel)) ws.ignored.push_back(rel + " (deleted)");

  for (const auto& rel : mapping.editable) {
    const fs::path from = candidateTree / rel;
    std::error_code ec;
    if (!fs::is_regular_file(fs::symlink_status(from, ec))) continue;  // deleted or a link: the pristine one stays
    if (mapping.splice_functions.empty()) {
      if (auto s = copyFile(from, dest / rel); !s) return s.error();
      if (auto s = copyModificationTime(pristine / rel, dest / rel); !s) return s.error();
      ws.taken.push_back(rel);
      continue;
    }
    auto theirs = readFileLimited(from, kMaxSplicedFileBytes);
    if (!theirs) {
      ws.ignored.push_back(rel + " (unreadable: " + theirs.error().message + ")");
      continue;
    }
    auto ours = readFileLimited(pristine / rel, kMaxSplicedFileBytes);
    if (!ours) return ours.error();
    auto spliced = spliceFunctions(*ours, *theirs, mapping.splice_functions);
    if (!spliced) return Error{rel + ": " + spliced.error().message};
    if (auto s = writeFile(dest / rel, spliced->text); !s) return s.error();
    if (auto s = copyModificationTime(pristine / rel, dest / rel); !s) return s.error();
    for (const auto& fn : spliced->spliced) ws.spliced.push_back(rel + ": " + fn);
    if (spliced->outsideChanged) ws.ignored.push_back(rel + " (changed outside target_kernel_functions)");
  }
  return ws;
}

}  // namespace akad::aka
