#pragma once
// Default locations shared by akad and akactl, so both agree without configuration.

#include <filesystem>
#include <string>

#include "common/data_root.h"  // dataRoot(): where policies/, tasks/, images/ live

namespace akad {

// --socket, else $AKAD_SOCKET, else /run/akad/akad.sock as root, $XDG_RUNTIME_DIR/akad.sock otherwise.
std::filesystem::path defaultSocketPath();
// /var/lib/akad as root, $XDG_STATE_HOME/akad (or ~/.local/state/akad) otherwise.
std::filesystem::path defaultStateDir();

}  // namespace akad
