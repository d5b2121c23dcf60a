#include "cli/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>

#include "cli/json_text.h"
#include "cli/options.h"
#include "cli/report_commands.h"

using nlohmann::json;

namespace akad::cli {
namespace {

// The progress line a terminal shows while a run goes on.
class Progress {
 public:
  explicit Progress(bool tty) : tty_(tty) {}
  void onEvent(const json& ev) {
    const std::string kind = str(ev, "kind");
    const json& data = ev.value("data", json::object());
    if (kind == "run.submitted") total_ = data.value("attempts", total_);
    if (kind == "attempt.state" && ev.contains("attempt_id")) state_[ev["attempt_id"].dump()] = str(data, "state");
    if (kind == "attempt.stage" && ev.contains("attempt_id")) stage_[ev["attempt_id"].dump()] = str(data, "stage");
    if (!tty_) {
      std::cout << str(ev, "at") << "  " << kind;
      if (ev.contains("attempt_id") && !ev["attempt_id"].is_null()) std::cout << " attempt " << ev["attempt_id"].dump();
      for (const auto& [k, v] : data.items()) std::cout << " " << k << "=" << (v.is_string() ? v.get<std::string>() : v.dump());
      std::cout << std::endl;
      return;
    }
    draw();
  }
  void done() {
    if (tty_) std::cout << "\n";
  }

 private:
  void draw() {
    int queued = 0, running = 0, ended = 0;
    for (const auto& [id, s] : state_) {
      if (s == "running") ++running;
      else if (s == "queued") ++queued;
      else ++ended;
    }
    const int total = std::max<int>(total_, static_cast<int>(state_.size()));
    queued += total - static_cast<int>(state_.size());
    const int width = 30;
    const int filled = total > 0 ? width * ended / total : 0;
    std::string bar(filled, '#');
    bar += std::string(width - filled, '-');
    std::string stage;
    for (const auto& [id, s] : state_)
      if (s == "running" && stage_.count(id)) stage = "attempt " + id + ": " + stage_[id];
    std::printf("\r[%s] %d/%d done, %d running, %d queued  %-40.40s", bar.c_str(), ended, total, running, queued,
                stage.c_str());
    std::fflush(stdout);
  }

  bool tty_;
  int total_ = 0;
  std::map<std::string, std::string> state_;
  std::map<std::string, std::string> stage_;
};

}  // namespace

int followRun(Client& client, const std::string& runId, bool report) {
  Progress progress(!cliOptions().json && ::isatty(STDOUT_FILENO));
  auto watched = client.stream("run.watch", json{{"id", runId}}, [&](const json& ev) {
    if (cliOptions().json) std::cout << ev.dump(-1, ' ', false, json::error_handler_t::replace) << std::endl;
    else progress.onEvent(ev);
  });
  progress.done();
  if (!watched) return reportError(watched.error());
  if (!report) {
    if (cliOptions().json) printJson(*watched);
    else std::cout << "run " << runId << " ended: " << str(watched->at("run"), "state") << "\n";
    return kExitOk;
  }
  return showReport(runId, cliOptions().json ? "json" : "text");
}

}  // namespace akad::cli
