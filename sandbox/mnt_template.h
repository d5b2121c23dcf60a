#pragma once
// Kept mount templates: the part of a sandbox's mount namespace that is the same for every
// sandbox of one layout (the tmpfs root with the system directories or the prepared root,
// /etc's essentials, /dev's tmpfs with its nodes and links, the mount points), built once,
// detached from the host's tree, made read-only at the superblock (both file systems) and
// kept as a mount namespace file under the template directory. A sandbox with
// `mount_template` copies it (setns + unshare(CLONE_NEWNS)) and adds only what is its own:
// devpts, /dev/shm, its devices, /proc, /tmp, its tmpfs mounts, workspace and binds. That
// skips copying the host's mount table, the pivot_root, the detach of the old root (an RCU
// grace period) and /dev's set-up on every spawn.
//
// The key of a template covers everything it was built from: the spec's layout (root, uid,
// gid, home, the mount points it needs, the devices' nodes) and the host (its mount table, and the identity of
// every system directory and /etc file that was copied or bound). A change on the host gives
// a new key; the templates of the old one are unmounted when the new one is made.
//
// Directory: $AKABOX_TEMPLATE_DIR, default /run/akabox/templates (root-owned, mode 0700).

#include <string>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "sandbox/devices.h"
#include "sandbox/spec.h"

namespace akad::box {

// In akabox, while the init starts: a descriptor of the template's mount namespace for this
// spec, building and keeping the template first if there is none for its key.
Result<UniqueFd> openMountTemplate(const SandboxSpec& spec, const std::vector<DevicePassthrough>& devices);

// The template a layout used last, opened without checking the host against it (its name is
// kept beside it, as `.last-<layout key>`): a spawn hands it to the init at once and checks
// it with mountTemplateCurrent() while it waits for the namespace thread. No descriptor if
// there is none. `layout` and `dir` are what the check needs from the opening (the layout
// reads the binds' sources).
struct LastMountTemplate {
  UniqueFd fd;
  std::string name, layout, dir;
};
LastMountTemplate openLastMountTemplate(const SandboxSpec& spec, const std::vector<DevicePassthrough>& devices);

// Whether `t` is still the template for its spec and the host as it is now (what
// openMountTemplate would open).
bool mountTemplateCurrent(const SandboxSpec& spec, const LastMountTemplate& t);

// In the init, which clone3 left in akabox's mount namespace: detached copies of the host
// paths the sandbox binds are taken first (the host is not reachable afterwards), then the
// template is entered and copied, and the per-sandbox mounts are added.
Status enterMountTemplate(const SandboxSpec& spec, const std::vector<DevicePassthrough>& devices, int templateNsFd);

// `akabox cleanup --templates`: unmounts and removes every kept template; returns how many.
Result<int> removeMountTemplates();

std::string mountTemplateDir();

}  // namespace akad::box
