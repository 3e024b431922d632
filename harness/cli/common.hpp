#pragma once
// What every foldcheck subcommand shares: output options (format, file, precision, threads,
// quiet, timing), the progress line on stderr, writing the output, the timing block and
// the exit code.
#include <CLI/CLI.hpp>
#include <chrono>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace foldcheck::cli {

using json = nlohmann::json;

struct OutputOptions {
  std::string format = "text";
  std::string output;
  long precision = 256;
  unsigned threads = 0;
  bool quiet = false;
  bool no_timing = false;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
};

// A CLI11 validator for output file options: refuses, at parse time, a path that cannot be
// written (missing directory, a directory, no permission), so a long run does not end in
// an error.
extern const CLI::Validator kWritablePath;

// formats: the values --format accepts (the first is the default).
void add_output_options(CLI::App* cmd, OutputOptions& o, const std::vector<std::string>& formats = {"text", "json"});

// The result's "timing" block (seconds since `o.started`, threads, host, finish time):
// what differs between runs of the same inputs; nothing with --no-timing.
void stamp(json& r, const OutputOptions& o);

// Progress on stderr, one line rewritten in place with the elapsed time: only when stderr
// is a terminal and not -q (an empty function otherwise).
std::function<void(const std::string&)> progress_printer(const OutputOptions& o);

// The result in the chosen --format: json, markdown and html (suite_reports.hpp) from the
// JSON; text by `text`.
std::string render(const OutputOptions& o, const json& result, const std::function<std::string(const json&)>& text);

// To -o FILE (atomically) or stdout.
void emit(const OutputOptions& o, const std::string& content);

// 0 when the result's verdict is EXPECTED, else 1.
int exit_code(const json& result);

}  // namespace foldcheck::cli
