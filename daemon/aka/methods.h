#pragma once
// tasks.import (admin only): imports the tasks of a user's AgentKernelArena checkout
// (daemon/aka/import.h); and what tasks.list adds about them. docs/protocol.md, docs/aka.md.

#include <filesystem>

#include <nlohmann/json.hpp>

namespace akad {
class MethodTable;
struct DaemonContext;

void registerAkaMethods(MethodTable& table, DaemonContext& context);

// Every AKA task imported or refused so far, with its class and reasons, as a JSON array for
// tasks.list's "aka" member (an "error" string member instead if the record cannot be read).
nlohmann::json akaTaskListing(const std::filesystem::path& stateDir);
}  // namespace akad
