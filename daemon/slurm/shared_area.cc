#include "daemon/slurm/shared_area.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/durable_file.h"
#include "common/unique_fd.h"

extern char** environ;

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad::slurm {

json toJson(const AttemptJobSpec& s) {
  return {{"attempt_id", s.attempt_id},
          {"run_id", s.run_id},
          {"task_id", s.task_id},
          {"task_hash", s.task_hash},
          {"agent", s.agent},
          {"agent_time_limit_s", s.agent_time_limit_s},
          {"snapshot", s.snapshot ? json(*s.snapshot) : json(nullptr)},
          {"images_dir", s.images_dir},
          {"akacheck", s.akacheck},
          {"allow_agent_network", s.allow_agent_network},
          {"workspace_bytes", s.workspace_bytes},
          {"workspace_inodes", s.workspace_inodes},
          {"sandbox_uid", s.sandbox_uid},
          {"sandbox_gid", s.sandbox_gid},
          {"candidate_uid", s.candidate_uid},
          {"node_cache", s.node_cache}};
}

Result<AttemptJobSpec> specFromJson(const json& j) {
  try {
    AttemptJobSpec s;
    s.attempt_id = j.at("attempt_id").get<std::int64_t>();
    s.run_id = j.at("run_id").get<std::string>();
    s.task_id = j.at("task_id").get<std::string>();
    s.task_hash = j.at("task_hash").get<std::string>();
    s.agent = j.at("agent");
    s.agent_time_limit_s = j.at("agent_time_limit_s").get<double>();
    if (!j.at("snapshot").is_null()) s.snapshot = j.at("snapshot").get<std::string>();
    s.images_dir = j.at("images_dir").get<std::string>();
    s.akacheck = j.at("akacheck").get<std::string>();
    s.allow_agent_network = j.at("allow_agent_network").get<bool>();
    s.workspace_bytes = j.at("workspace_bytes").get<std::uint64_t>();
    s.workspace_inodes = j.at("workspace_inodes").get<std::uint64_t>();
    s.sandbox_uid = j.at("sandbox_uid").get<uid_t>();
    s.sandbox_gid = j.at("sandbox_gid").get<gid_t>();
    s.candidate_uid = j.at("candidate_uid").get<uid_t>();
    s.node_cache = j.value("node_cache", std::string());  // absent in a spec of an older front end
    if (!s.node_cache.empty() && s.node_cache.front() != '/') return Error{"the job's node cache is not an absolute path"};
    if (s.task_id.find('/') == std::string::npos || s.task_hash.empty() || s.task_hash.find('/') != std::string::npos)
      return Error{"the job's task is malformed"};
    return s;
  } catch (const json::exception& e) {
    return Error{std::string("malformed job spec: ") + e.what()};
  }
}

namespace {

std::string randomSuffix() {
  unsigned char b[6];
  if (::getrandom(b, sizeof b, 0) != static_cast<ssize_t>(sizeof b)) return std::to_string(::getpid());
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned char c : b) {
    s += hex[c >> 4];
    s += hex[c & 15];
  }
  return s;
}

}  // namespace

Status publishTree(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  if (fs::exists(to, ec)) return {};
  fs::create_directories(to.parent_path(), ec);
  if (ec) return Error{"cannot create " + to.parent_path().string() + ": " + ec.message()};
  std::string name = ".";  // appended piece by piece: g++ 12 warns (-Wrestrict) on "." + string
  name += to.filename().string();
  name += ".tmp-";
  name += randomSuffix();
  const fs::path tmp = to.parent_path() / name;
  fs::copy(from, tmp, fs::copy_options::recursive, ec);
  if (ec) {
    fs::remove_all(tmp, ec);
    return Error{"cannot copy " + from.string() + " into the shared area: " + ec.message()};
  }
  if (::rename(tmp.c_str(), to.c_str()) != 0) {
    const int err = errno;
    fs::remove_all(tmp, ec);
    // Another front end (or an earlier call) published the same version meanwhile.
    if ((err == ENOTEMPTY || err == EEXIST) && fs::exists(to, ec)) return {};
    return Error{"cannot rename " + tmp.string() + " to " + to.string() + ": " + std::strerror(err)};
  }
  return fsyncPath(to.parent_path());
}

std::string incarnationName(const std::string& job, int restart) {
  return "out-" + job + "-" + std::to_string(restart);
}

Result<CommandOutput> runCommand(const std::vector<std::string>& argv) {
  if (argv.empty()) return Error{"no command"};
  int outPipe[2], errPipe[2];
  if (::pipe2(outPipe, O_CLOEXEC) != 0) return errnoError("pipe");
  if (::pipe2(errPipe, O_CLOEXEC) != 0) {
    ::close(outPipe[0]);
    ::close(outPipe[1]);
    return errnoError("pipe");
  }
  UniqueFd outR(outPipe[0]), outW(outPipe[1]), errR(errPipe[0]), errW(errPipe[1]);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, outW.get(), 1);
  posix_spawn_file_actions_adddup2(&fa, errW.get(), 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return Error{"cannot run " + argv[0] + ": " + std::strerror(rc)};
  outW.reset();
  errW.reset();
  CommandOutput result;
  constexpr size_t kMax = 1 << 20;
  pollfd fds[2] = {{outR.get(), POLLIN, 0}, {errR.get(), POLLIN, 0}};
  int open = 2;
  char buf[4096];
  while (open > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        fds[i].fd = -1;
        --open;
        continue;
      }
      std::string& dst = i == 0 ? result.out : result.err;
      if (dst.size() < kMax) dst.append(buf, static_cast<size_t>(std::min<size_t>(n, kMax - dst.size())));
    }
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return errnoError("waitpid " + argv[0]);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace akad::slurm
