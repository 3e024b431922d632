// Shared CLI pieces (common.hpp).
#include "common.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <ctime>
#include <iostream>
#include <thread>

#include <fmt/format.h>

#include "foldcheck/errors.hpp"
#include "foldcheck/reports/output_file.hpp"
#include "foldcheck/reports/suite_reports.hpp"

namespace foldcheck::cli {

const CLI::Validator kWritablePath(
    [](std::string& path) { return reports::writable_problem(path); }, "FILE");

namespace {

std::vector<const CLI::Option*>& output_options() {
  static std::vector<const CLI::Option*> v;
  return v;
}

bool is_output(const CLI::Option* o) {
  const auto& v = output_options();
  return std::find(v.begin(), v.end(), o) != v.end();
}

// The same file: one inode when both exist, else the same normalized absolute path.
bool same_file(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  std::error_code e1, e2;
  if (fs::exists(a, e1) && fs::exists(b, e2)) return fs::equivalent(a, b, e1);
  return fs::weakly_canonical(a, e1) == fs::weakly_canonical(b, e2) && !e1 && !e2;
}

void check_against(const CLI::Option* out, const std::string& path, const CLI::Option* other) {
  for (const std::string& value : other->results()) {
    if (value.empty()) continue;
    std::error_code ec;
    const bool other_is_file = is_output(other) || std::filesystem::is_regular_file(value, ec);
    if (other_is_file && same_file(path, value))
      throw InputError(fmt::format("{}: {} is also {} '{}' (refused: it would be overwritten)", out->get_name(), path,
                                   is_output(other) ? "the output" : "the input", other->get_name()));
  }
}

}  // namespace

CLI::Validator finite_number(double lo, bool strict, double hi) {
  return CLI::Validator(
      [lo, strict, hi](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const double v = std::strtod(text.c_str(), &end);
        const std::string want = fmt::format("a finite number {} {:g}{}", strict ? ">" : ">=", lo,
                                             hi < 1e300 ? fmt::format(" and <= {:g}", hi) : "");
        if (text.empty() || *end != '\0' || !std::isfinite(v) || (strict ? !(v > lo) : !(v >= lo)) || !(v <= hi))
          return fmt::format("must be {}, got '{}'", want, text);
        return "";
      },
      "NUMBER");
}

CLI::Validator known_name(std::function<void(const std::string&)> lookup) {
  return CLI::Validator(
      [lookup](std::string& text) -> std::string {
        try {
          lookup(text);
        } catch (const InputError& e) {
          return e.what();
        }
        return "";
      },
      "NAME");
}

CLI::Option* output_file_option(CLI::Option* o) {
  output_options().push_back(o);
  return o->check(kWritablePath);
}

void refuse_outputs_that_are_inputs(const CLI::App& app) {
  std::vector<const CLI::Option*> given;
  for (const CLI::Option* o : app.get_options())
    if (o->count() > 0) given.push_back(o);
  for (const CLI::App* sub : app.get_subcommands())
    for (const CLI::Option* o : sub->get_options())
      if (o->count() > 0) given.push_back(o);
  for (const CLI::Option* out : given) {
    if (!is_output(out)) continue;
    for (const std::string& path : out->results())
      for (const CLI::Option* other : given)
        if (other != out) check_against(out, path, other);
  }
}

void add_output_options(CLI::App* cmd, OutputOptions& o, const std::vector<std::string>& formats) {
  o.format = formats.front();
  cmd->add_option("--format", o.format, "Output format")->check(CLI::IsMember(formats))->capture_default_str();
  output_file_option(cmd->add_option("-o,--output", o.output,
                                     "Write the output to FILE instead of stdout (a regular file atomically; a device "
                                     "such as /dev/null in place)"));
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

std::string json_text(const json& r, int indent) { return r.dump(indent, ' ', false, json::error_handler_t::replace); }

std::string render(const OutputOptions& o, const json& r, const std::function<std::string(const json&)>& text) {
  if (o.format == "json") return json_text(r);
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

std::string one_line(const std::string& message) {
  std::string out;
  for (const char ch : message) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20 || c == 0x7f)
      out += fmt::format("\\x{:02x}", c);
    else
      out += ch;
  }
  return out;
}

int exit_code(const json& result) { return result["verdict"] == "EXPECTED" ? 0 : 1; }

}  // namespace foldcheck::cli
