#pragma once
// Outcomes measured with real AgentKernelArena tasks that the static rules of classify.cc did
// not predict (issue 25: "predictions that turn out wrong are corrected in the classifier").
// Where no rule can see the cause in the files (a pristine kernel whose results miss AKA's own
// tolerance on one vendor's GPUs), the measurement itself is the rule: it names the task, the
// platform and the digest of the task's files as measured, and applies only while the files
// are those bytes, so a task AKA later fixes is judged by the static rules again.

#include <map>
#include <string>

#include "daemon/aka/classify.h"

namespace akad::aka {

// The digest of a task's files as the importer read them (path and sha256 of each, in path
// order), before anything akad fills in: what a measured outcome is keyed on.
std::string taskDigest(const std::map<std::string, std::string>& files);

// Raises `k` to the measured class, with the measurement as its reason, when `name` on
// `platform` was measured with files of this digest. False when nothing was measured.
bool applyMeasuredOutcome(const std::string& name, Platform platform, const std::string& digest, Classification& k);

}  // namespace akad::aka
