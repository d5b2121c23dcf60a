#pragma once
// Default locations shared by akad and akactl, so both agree without configuration.

#include <filesystem>
#include <string>

namespace akad {

// --socket, else $AKAD_SOCKET, else /run/akad/akad.sock as root, $XDG_RUNTIME_DIR/akad.sock otherwise.
std::filesystem::path defaultSocketPath();
// /var/lib/akad as root, $XDG_STATE_HOME/akad (or ~/.local/state/akad) otherwise.
std::filesystem::path defaultStateDir();
// Where policies/, tasks/, images/ live: $AKAD_DATA_DIR, else the source tree the binaries were built from.
std::filesystem::path dataRoot();

}  // namespace akad
