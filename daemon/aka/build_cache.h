#pragma once
// The candidate's build cache across scorings (docs/aka.md, "Build cache"): what a wrapped
// candidate's commands left in their cache folder (torch extensions, Triton kernels, bytecode)
// is kept under a key made of the task version, the submitter and the exact bytes of every
// file the scorer took from the candidate, and handed to the next scoring with the same key (a
// re-score, a reproduction), which then does not build it again. An entry is only ever used
// for the bytes that made it, by the submitter whose code made it.

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/result.h"

namespace akad::aka {

struct BuildCacheLimits {
  std::uintmax_t entry_bytes = 2ull << 30;  // a larger cache folder is not kept
  std::size_t entries = 64;                 // the least recently used go first
};

// The key: SHA-256 over the task version, the scope (the submitter) and each editable path
// with the bytes the assembled workspace holds there (or that it holds none).
Result<std::string> candidateBuildKey(const std::string& taskHash, const std::string& scope,
                                      const std::vector<std::string>& editable, const std::filesystem::path& workspace);

// Copies the entry for `key` into `jit` (which must not exist), keeping file times so build
// tools see their outputs as current. false: no entry.
Result<bool> restoreCandidateBuild(const std::filesystem::path& root, const std::string& key,
                                   const std::filesystem::path& jit);

// Keeps `jit` (every process that wrote it has ended) as the entry for `key`, unless one
// exists or it is over the size limit; removes the least recently used entries over the
// count limit. Returns what it did, for the result.
Result<std::string> publishCandidateBuild(const std::filesystem::path& root, const std::string& key,
                                          const std::filesystem::path& jit, const BuildCacheLimits& limits = {});

// The trusted baseline's built extensions (the compat layer's
// torch_extensions/akad-built/<key>/<name>.so under `trustedJit`) that the candidate's cache
// folder `jit` lacks, copied in and given to uid:gid. The compat layer finds a module by a key
// of its sources' bytes, flags and toolchain, so the candidate loads one only where its sources
// are byte for byte the pristine ones: what building them itself would give. Nothing else of
// the trusted folder is copied (its Triton cache and bytecode may hold held-out shapes). The
// candidate's folder is walked without following links (its code may have planted them);
// none of its processes may be running. Returns how many modules were copied.
Result<int> seedBuiltExtensions(const std::filesystem::path& trustedJit, const std::filesystem::path& jit, uid_t uid,
                                gid_t gid);

}  // namespace akad::aka
