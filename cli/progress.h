#pragma once
// Following a run while it goes on: a progress bar on a terminal, one line per event
// otherwise (and with --json, the events as JSON lines).

#include <string>

#include "common/client.h"

namespace akad::cli {

// Follows a run until it ends; then, if `report`, prints the run report. Returns the exit
// code.
int followRun(Client& client, const std::string& runId, bool report);

}  // namespace akad::cli
