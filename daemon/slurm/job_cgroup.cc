#include "daemon/slurm/job_cgroup.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

namespace akad::slurm {

namespace {

Error sysError(const std::string& what) { return Error{what + ": " + std::strerror(errno)}; }

Status writeText(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  if (!out) return sysError("cannot open " + path);
  out << text;
  out.flush();
  if (!out) return sysError("cannot write '" + text + "' to " + path);
  return {};
}

std::vector<std::string> readLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) lines.push_back(l);
  return lines;
}

}  // namespace

Result<std::string> ownCgroupV2(const std::string& procSelfCgroup) {
  for (const auto& line : readLines(procSelfCgroup))
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  return Error{procSelfCgroup + " has no cgroup v2 line (0::)"};
}

Result<JobCgroup> nestUnderJobCgroup(const std::string& root, const std::string& job) {
  if (job.empty() || job == "/" || job.find("..") != std::string::npos)
    return Error{"not in a job cgroup of its own (cgroup '" + job + "')"};
  JobCgroup c;
  c.root = root;
  c.job = job.front() == '/' ? job.substr(1) : job;
  const std::string dir = root + "/" + c.job;
  const std::string node = dir + "/akad-node";
  if (::mkdir(node.c_str(), 0755) != 0 && errno != EEXIST) return sysError("cannot create cgroup " + node);
  // Every process of the job's cgroup (the batch step's: this program, a shell that did not
  // exec), one by one; a process that exited meanwhile is not an error.
  for (int round = 0; round < 10; ++round) {
    const auto pids = readLines(dir + "/cgroup.procs");
    if (pids.empty()) break;
    for (const auto& pid : pids)
      if (auto s = writeText(node + "/cgroup.procs", pid); !s && ::kill(std::stoi(pid), 0) == 0) {
        ::rmdir(node.c_str());
        return s.error();
      }
  }
  if (!readLines(dir + "/cgroup.procs").empty()) {
    ::rmdir(node.c_str());
    return Error{"processes keep appearing in " + dir};
  }
  c.sandbox_parent = c.job + "/sandboxes";
  return c;
}

Status leaveJobCgroup(const JobCgroup& c) {
  const std::string dir = c.root + "/" + c.job;
  Status first;
  auto note = [&](Status s) {
    if (!s && first) first = s;
  };
  if (::rmdir((dir + "/sandboxes").c_str()) != 0 && errno != ENOENT)
    note(sysError("cannot remove cgroup " + dir + "/sandboxes"));
  // Controllers handed to the children block processes from living in the job's cgroup again.
  const auto enabled = readLines(dir + "/cgroup.subtree_control");
  if (!enabled.empty()) {
    std::istringstream words(enabled.front());
    std::string off;
    for (std::string w; words >> w;) off += (off.empty() ? "-" : " -") + w;
    if (!off.empty()) note(writeText(dir + "/cgroup.subtree_control", off));
  }
  note(writeText(dir + "/cgroup.procs", std::to_string(::getpid())));
  if (::rmdir((dir + "/akad-node").c_str()) != 0 && errno != ENOENT)
    note(sysError("cannot remove cgroup " + dir + "/akad-node"));
  return first;
}

}  // namespace akad::slurm
