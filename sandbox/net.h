#pragma once
// The sandbox's network namespace (--net none): only a loopback interface, up.

#include "common/result.h"
#include "common/unique_fd.h"

namespace akad::box {

// Creates the namespace and brings lo up in it, from akabox itself rather than in the init:
// creating a network namespace is the costliest single step of a spawn (every protocol
// registers its per-namespace state), and akabox does it on the second core while the init
// builds its mount namespace. akabox steps in only for this and returns to its own network
// namespace before this returns; the init enters the new one with setns() on release.
Result<UniqueFd> createNetworkNamespace();

// The same from the init, into its own new network namespace: with a mount template the
// init's own set-up is short, and akabox's cgroup work becomes the other core's share.
Status enterNewNetworkNamespace();

}  // namespace akad::box
