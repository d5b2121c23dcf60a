#pragma once
// The sandbox's network with --net none: a fresh network namespace (made by akabox's
// namespace thread, ns_thread.h) whose only interface, lo, is brought up. With --net host the
// sandbox keeps the host's network namespace and nothing here runs.

namespace akad::box {

// A fresh network namespace has only a loopback interface, and it is down: up it goes, in the
// calling thread's namespace. Returns the step that failed, with errno set, or null. Plain
// system calls only: it runs on a thread that may be copied by clone3 (ns_thread.h).
const char* bringLoopbackUp();

}  // namespace akad::box
