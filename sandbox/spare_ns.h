#pragma once
// Spare namespaces: network (with lo up), ipc and uts namespaces made ahead by an earlier
// akabox run and kept under the mount template directory, so that a run takes ready ones
// instead of making its own. Making a network namespace is the costliest step of a spawn
// (0.55-0.75 ms of kernel work: every protocol registers its per-namespace state), and it
// ran beside the rest of the set-up, where it also slowed the other parties (GPU machine:
// 0.2 ms per spawn with a template, measured with namespaces kept outside akabox).
//
// Only with a mount template (akabox may keep state there, under the same root-only
// directory and the same `akabox cleanup --templates`) and with CPUs to spare (spinningPays
// in subproc.h): each run makes the next run's spare on its namespace thread while its
// command runs, which on two CPUs would take the command's or akabox's CPU.
//
// Layout, in <template dir>/.spare-ns (root's, mode 0700): a spare is a directory named by
// its slot ("0" .. kSlots-1) holding `m`, a private bind mount of itself, with the files
// `net`, `ipc` and `uts`, each a bind of one namespace file. A spare is published whole by
// renaming its directory into a free slot (RENAME_NOREPLACE), and claimed by renaming it out
// of the slot to a name of the claimer's: one rename wins, so no namespace is handed out twice,
// and a claimer that dies leaves its claimed directory behind, never in a slot. The claimer
// unmounts `m` (one lazy unmount for all four mounts) once it has entered the namespaces.
//
// Everything here but removeSpares() runs on akabox's namespace thread, which may run while
// akabox calls clone3 (net.h): system calls only, no allocation.

#include <string>

namespace akad::box::spare {

constexpr int kSlots = 2;

// The spare directory's path for a template directory.
std::string directoryFor(const std::string& templateDir);

// Opens the spare directory if it is root's and closed to others (-1 otherwise; with
// `create`, makes it first, in a template directory that is itself root's and closed).
int openDirectory(const char* templateDir, const char* spareDir, bool create);

// Claims a spare and moves the calling thread into its three namespaces. True on success;
// `claimed` (at least 64 bytes) then names the claimed directory for discard(). A spare that
// cannot be entered is discarded and the next slot tried.
bool claim(int dirFd, char* claimed);

// Unmounts and removes a claimed spare (an expedited RCU grace period: off the set-up's path).
void discard(int dirFd, const char* claimed);

// Makes one spare and publishes it in a free slot, if there is one: the calling thread
// unshares fresh namespaces for itself (it ends in them), brings lo up and binds them.
void make(int dirFd);

// `akabox cleanup --templates`: unmounts and removes every spare, claimed ones and
// unfinished ones included, and the directory. Returns how many were removed.
int removeSpares(const std::string& templateDir);

}  // namespace akad::box::spare
