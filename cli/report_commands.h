#pragma once
// A run's outcome: report (rates, speedups, scores), results (every attempt with its gates),
// logs (an attempt's logs).

#include <string>

#include <CLI/CLI.hpp>

namespace akad::cli {

void addReportCommands(CLI::App& app, int& exitCode);
// Prints a run's report as text, CSV (`format` "csv") or JSON; returns the exit code.
int showReport(const std::string& id, const std::string& format);

}  // namespace akad::cli
