#pragma once
// Shared between create.cc and store.cc: the store writes into its own temporary file.

#include <filesystem>

#include "daemon/snapshot/snapshot.h"

namespace akad::snapshot {

Result<Manifest> createArchiveToFd(const std::filesystem::path& dir, int outFd, const CreateOptions& options,
                                   const nlohmann::json& metadata);

}  // namespace akad::snapshot
