#pragma once
// What every foldcheck subcommand shares: output options (format, file, precision, threads,
// quiet, timing), the progress line on stderr, writing the output, the timing block and
// the exit code.
#include <CLI/CLI.hpp>
#include <chrono>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "foldcheck/commands/option_ranges.hpp"
#include "foldcheck/numerics/compare.hpp"

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

// Numeric options: the value must be a finite number (NaN and infinities would silently
// disable a tolerance or a timeout) above `lo` (strictly when `strict`) and at most `hi`.
// Messages are short ("must be a finite number > 0, got 'nan'"), never DBL_MAX's digits.
CLI::Validator finite_number(double lo, bool strict, double hi = 1e300);

// Integer options: decimal digits only (no sign, no wrap-around of "-1" into 2^64 - 1), from
// lo to hi. Messages name the range ("must be an integer from 1 to 4096, got 'x'").
CLI::Validator integer_in(std::uint64_t lo, std::uint64_t hi);
// The options' ranges (option_ranges.hpp: the Python functions' arguments are held to the same).
inline CLI::Validator integer_in(options::IntegerRange r) { return integer_in(r.lo, r.hi); }
inline CLI::Validator finite_number(options::NumberRange r) { return finite_number(r.lo, r.lo_excluded, r.hi); }

// An option naming one of a set (a dtype, a recipe, a rounding): `lookup` throws InputError
// for an unknown name, and its message becomes the parse error "--FLAG: unknown ...".
CLI::Validator known_name(std::function<void(const std::string&)> lookup);

// A CLI11 validator for report directories (suite and merge -o): refuses, at parse time, a
// path that exists and is not a directory, or whose nearest existing ancestor is not one.
extern const CLI::Validator kReportDirectory;

// Declares `o` an output file option: checked with kWritablePath, and known to
// refuse_outputs_that_are_inputs. Returns `o`.
CLI::Option* output_file_option(CLI::Option* o);

// After parsing: InputError when an output file option names the same file as another
// option's value (`run case.json -o case.json`, `quant-check --write-int W.npy --weights
// W.npy`) or as another output, so that no input is overwritten and no output lost. Inputs
// named inside files (a suite's cases, a model's external data) are caught when written:
// the write-time half of this rule is note_input_file in io/output_file.hpp.
void refuse_outputs_that_are_inputs(const CLI::App& app);

// formats: the values --format accepts (the first is the default).
void add_output_options(CLI::App* cmd, OutputOptions& o, const std::vector<std::string>& formats = {"text", "json"});

// The result's "timing" block (seconds since `o.started`, threads, host, finish time):
// what differs between runs of the same inputs; nothing with --no-timing.
void stamp(json& r, const OutputOptions& o);

// Progress on stderr, one line rewritten in place with the elapsed time: only when stderr
// is a terminal and not -q (an empty function otherwise).
std::function<void(const std::string&)> progress_printer(const OutputOptions& o);

// JSON text of a result. Strings that came from outside may hold bytes that are not UTF-8
// (a file name): JSON cannot, so they are written as U+FFFD instead of failing the write.
std::string json_text(const json& r, int indent = 2);

// How a command's result goes out (finish, render): its renderers and what it writes besides.
struct Ending {
  // --format text, given the result with every string on one line (render).
  std::function<std::string(const json&)> text;
  // --format markdown: the command's own renderer (compare's); none: report_markdown.
  std::function<std::string(const json&)> markdown = {};
  // Files of the command's own (a suite's report directory), written from the result as it
  // is (stamped) before the output; none: nothing.
  std::function<void(const json&)> files = {};
  // With the timing block (stamp). compare and merge carry what they read: false.
  bool stamped = true;
};

// The result in the chosen --format: json (json_text), markdown (`ending.markdown`, else
// suite_reports.hpp's) and html (suite_reports.hpp) from the JSON; text by `ending.text`,
// given the result with every string neutralised (reports::neutralised_strings: a name from a
// file cannot forge a line of the text nor drive the terminal); `ending.markdown` the same.
std::string render(const OutputOptions& o, const json& result, const Ending& ending);

// To -o FILE (atomically) or stdout; every format but JSON through reports::neutralised_page.
void emit(const OutputOptions& o, const std::string& content);

// The error line for a message from anywhere (a file's bytes may be in it): neutralised as a
// name is (reports/neutralise.hpp: \n, \t, \u001B...) so that the message stays one line on a
// terminal and in a log, whatever a file held.
std::string one_line(const std::string& raw);

// The one way every command's result goes out: stamped (timing) unless `ending` says not,
// the progress line cleared when one was shown, the command's own files written, rendered
// in --format (render) to -o or stdout (emit); returns `code`, the exit code.
int finish(const OutputOptions& o, json result, int code, const Ending& ending, bool progress_shown);
// The same for a typed result: the exit code of its verdict `v`, shown as text by `text`.
int finish(const OutputOptions& o, json result, Verdict v, const std::function<std::string(const json&)>& text,
           bool progress_shown);

// 0 when the verdict is EXPECTED, else 1: a typed result's verdict(), or the "verdict" a
// report holds (merge and compare read and write report files, not typed results).
int exit_code(Verdict v);
int exit_code_of_report(const json& report);

}  // namespace foldcheck::cli
