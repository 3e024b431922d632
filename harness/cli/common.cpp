// Shared CLI pieces (common.hpp).
#include "common.hpp"

#include "foldcheck/reports/neutralise.hpp"

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

#include "foldcheck/base/errors.hpp"
#include "foldcheck/io/output_file.hpp"
#include "foldcheck/reports/suite_reports.hpp"
#include "foldcheck/result/views/json_io.hpp"

namespace foldcheck::cli {

const CLI::Validator kWritablePath(
    [](std::string& path) { return writable_problem(path); }, "FILE");

const CLI::Validator kReportDirectory(
    [](std::string& dir) -> std::string {
      namespace fs = std::filesystem;
      if (dir.empty()) return "empty directory path";
      std::error_code ec;
      // The path, or the nearest ancestor that exists, must be a directory.
      for (fs::path p = fs::absolute(dir, ec); !p.empty(); p = p.parent_path()) {
        if (fs::exists(p, ec)) {
          if (!fs::is_directory(p, ec)) return fmt::format("{}: cannot create the report directory ({} is not a directory)", dir, p.string());
          return "";
        }
        if (p == p.parent_path()) break;
      }
      return "";
    },
    "DIR");

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

CLI::Validator integer_in(std::uint64_t lo, std::uint64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        errno = 0;
        char* end = nullptr;
        const bool digits = !text.empty() && text.size() <= 20 && text.find_first_not_of("0123456789") == std::string::npos;
        const unsigned long long v = digits ? std::strtoull(text.c_str(), &end, 10) : 0;
        if (!digits || errno || v < lo || v > hi)
          return fmt::format("must be an integer from {} to {}, got '{}'", lo, hi, text);
        return "";
      },
      "INT");
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
      ->check(integer_in(options::kPrecision))
      ->capture_default_str();
  cmd->add_option("--threads", o.threads, "Threads (0: all cores); results are identical for any count")
      ->check(integer_in(options::kThreads))
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
    std::cerr << fmt::format("\r\033[K[{:6.1f}s] {}", s, reports::neutralised(msg)) << std::flush;
  };
}

std::string json_text(const json& r, int indent) { return r.dump(indent, ' ', false, json::error_handler_t::replace); }

std::string render(const OutputOptions& o, const json& r, const Ending& ending) {
  if (o.format == "json") return json_text(r);
  if (o.format == "markdown")
    return ending.markdown ? ending.markdown(reports::neutralised_strings(r)) : reports::report_markdown(r);
  if (o.format == "html") return reports::report_html(r);
  return ending.text(reports::neutralised_strings(r));
}

void emit(const OutputOptions& o, const std::string& raw) {
  // Reports quote names from files (case, node, producer names): render neutralised each one
  // (reports/neutralise.hpp); again here for every page a command writes, so that no string a
  // renderer did not take from the result can drive a terminal. JSON keeps names exact.
  const std::string content = o.format == "json" ? raw : reports::neutralised_page(raw);
  if (o.output.empty()) {
    std::cout << content;
    if (!content.empty() && content.back() != '\n') std::cout << '\n';
    std::cout.flush();
  } else {
    write_file_atomically(o.output, content);
  }
}

std::string one_line(const std::string& raw) {
  std::string out = reports::neutralised(raw);  // one line, whatever a file or a name held
  // A message quotes what it refuses (a token, a name): a 900 KB number stays a line to read.
  constexpr std::size_t kMaxLine = 2000;
  if (out.size() > kMaxLine) {
    std::size_t cut = kMaxLine;
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 sequence
    out = fmt::format("{}… ({} bytes in all)", out.substr(0, cut), out.size());
  }
  return out;
}

// A report's verdict restored by name (result/views/json_io.hpp); one without a verdict passes nothing.
int exit_code_of_report(const json& report) {
  return exit_code(result::views::optional_verdict(report, "verdict").value_or(Verdict::Mistrusted));
}

int exit_code(Verdict v) { return v == Verdict::Expected ? 0 : 1; }

int finish(const OutputOptions& o, json result, int code, const Ending& ending, bool progress_shown) {
  if (ending.stamped) stamp(result, o);
  if (progress_shown) std::cerr << "\r\033[K";
  if (ending.files) ending.files(result);
  emit(o, render(o, result, ending));
  return code;
}

int finish(const OutputOptions& o, json result, Verdict v, const std::function<std::string(const json&)>& text,
           bool progress_shown) {
  return finish(o, std::move(result), exit_code(v), Ending{text}, progress_shown);
}

}  // namespace foldcheck::cli
