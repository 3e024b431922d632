// Shared CLI pieces (common.hpp).
#include "common.hpp"

#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <iostream>
#include <thread>

#include <fmt/format.h>

#include "foldcheck/reports/output_file.hpp"
#include "foldcheck/reports/suite_reports.hpp"

namespace foldcheck::cli {

const CLI::Validator kWritablePath(
    [](std::string& path) { return reports::writable_problem(path); }, "FILE");

void add_output_options(CLI::App* cmd, OutputOptions& o, const std::vector<std::string>& formats) {
  o.format = formats.front();
  cmd->add_option("--format", o.format, "Output format")->check(CLI::IsMember(formats))->capture_default_str();
  cmd->add_option("-o,--output", o.output, "Write the output to FILE (atomically) instead of stdout")->check(kWritablePath);
  cmd->add_option("--precision", o.precision, "Starting working precision of the reference, in bits")
      ->check(CLI::Range(64L, 65536L))
      ->capture_default_str();
  cmd->add_option("--threads", o.threads, "Threads (0: all cores); results are identical for any count")
      ->capture_default_str();
  cmd->add_flag("-q,--quiet", o.quiet, "No progress messages on stderr");
  cmd->add_flag("--no-timing", o.no_timing,
                "Leave out the timing block (seconds, threads, host, finish time): the JSON is then the same bytes for "
                "the same inputs on any run and thread count");
}

void stamp(json& r, const OutputOptions& o) {
  if (o.no_timing) return;
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  const std::time_t now = std::time(nullptr);
  char utc[32];
  std::strftime(utc, sizeof utc, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  json t{{"seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - o.started).count()},
         {"threads", o.threads ? o.threads : std::max(1u, std::thread::hardware_concurrency())},
         {"host", host},
         {"finished_utc", utc}};
  if (r.contains("timing")) t.update(r["timing"]);  // e.g. a suite's per-entry seconds
  r["timing"] = t;
}

std::function<void(const std::string&)> progress_printer(const OutputOptions& o) {
  if (o.quiet || !isatty(STDERR_FILENO)) return {};
  const auto t0 = std::chrono::steady_clock::now();
  return [t0](const std::string& msg) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cerr << fmt::format("\r\033[K[{:6.1f}s] {}", s, msg) << std::flush;
  };
}

std::string render(const OutputOptions& o, const json& r, const std::function<std::string(const json&)>& text) {
  if (o.format == "json") return r.dump(2);
  if (o.format == "markdown") return reports::report_markdown(r);
  if (o.format == "html") return reports::report_html(r);
  return text(r);
}

void emit(const OutputOptions& o, const std::string& content) {
  if (o.output.empty()) {
    std::cout << content;
    if (!content.empty() && content.back() != '\n') std::cout << '\n';
    std::cout.flush();
  } else {
    reports::write_file_atomically(o.output, content);
  }
}

int exit_code(const json& result) { return result["verdict"] == "EXPECTED" ? 0 : 1; }

}  // namespace foldcheck::cli
