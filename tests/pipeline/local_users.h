#pragma once
// Real local users for tests that play tenants: a group and three users of the test's own
// (made with groupadd/useradd, removed by the names the test chose when it ends), and akactl run
// as one of them through setpriv.
#include <pwd.h>

#include <string>
#include <vector>

#include "tests/daemon/harness.h"

namespace akad::test {

class LocalUsers {
 public:
  LocalUsers() : tag_("akt" + std::to_string(::getpid() % 100000)) {
    ok_ = run({"/usr/sbin/groupadd", group()});
    for (const char* who : {"a", "b", "c"}) {
      // No subordinate ids: the users need none, and akad refuses to start when a user's
      // range covers its sandboxes' uids.
      ok_ = ok_ && run({"/usr/sbin/useradd", "--no-create-home", "--no-user-group", "--shell", "/usr/sbin/nologin",
                        "-K", "SUB_UID_COUNT=0", "-K", "SUB_GID_COUNT=0",
                        "--gid", who == std::string("c") ? "nogroup" : group(), name(who)});
      if (ok_) made_.push_back(name(who));
    }
  }
  ~LocalUsers() {
    for (const std::string& u : made_) run({"/usr/sbin/userdel", u});
    run({"/usr/sbin/groupdel", group()});
  }
  LocalUsers(const LocalUsers&) = delete;
  LocalUsers& operator=(const LocalUsers&) = delete;
  bool ok() const { return ok_; }
  // "a" and "b" are in group(); "c" is not.
  std::string group() const { return tag_ + "g"; }
  std::string name(const std::string& who) const { return tag_ + who; }
  uid_t uid(const std::string& who) const {
    const passwd* pw = ::getpwnam(name(who).c_str());
    return pw ? pw->pw_uid : static_cast<uid_t>(-1);
  }
  // `argv` run as user `who` (its uid, its group, its supplementary groups).
  std::vector<std::string> asUser(const std::string& who, const std::vector<std::string>& argv) const {
    const passwd* pw = ::getpwnam(name(who).c_str());
    std::vector<std::string> out = {"/usr/bin/setpriv", "--reuid", std::to_string(pw ? pw->pw_uid : 65534),
                                    "--regid", std::to_string(pw ? pw->pw_gid : 65534), "--init-groups", "--"};
    out.insert(out.end(), argv.begin(), argv.end());
    return out;
  }

 private:
  static bool run(const std::vector<std::string>& argv) {
    return runCommand(argv, {}, std::chrono::seconds(30)).exitCode == 0;
  }
  std::string tag_;
  bool ok_ = false;
  std::vector<std::string> made_;
};

}  // namespace akad::test
