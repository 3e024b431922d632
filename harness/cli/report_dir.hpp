#pragma once
// Report directories and reports read back, shared by `suite`, `merge` and `compare`:
// DIR/report.json, report.md, report.html, junit.xml and results/ written after every
// target is checked; a report read back checked to be foldcheck's, of this schema version.
#include <functional>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace foldcheck::cli {

using json = nlohmann::json;

// A report for compare and merge: a foldcheck JSON report of this schema version and a
// command whose results compare (suite, run, accuracy-diff), or InputError naming the file.
json read_report(const std::string& path, const std::string& what);

// Every count and index of a report or result read back (elements, channels, layers, beyond-bound
// and NaN counts, shapes, a channel's index, ...: kCountKeys in report_dir.cpp) is a non-negative
// integer, or InputError naming `path` and the field's JSON pointer. A negative one would be read
// as fewer failures than none (the typed views refuse it too, where they read it).
void check_counts(const json& report, const std::string& path);

// Runs `job` on reports read from users' files; a report that passes read_report but still
// lacks a value, or holds one of the wrong type or length, becomes an InputError naming
// `files` instead of a bare JSON or range error.
int as_report_error(const std::string& files, const std::function<int()>& job);

// DIR/report.json, report.md, report.html, junit.xml (and the full results, if given). Every
// file is rendered and every target checked before the first is written.
void write_report_dir(const std::string& dir, const json& report, const std::map<std::string, json>& results);

// "suite NAME: P passed, F failed -> DIR/report.json, ...; verdict V"
std::string counts_line(const json& report, const std::string& dir);

}  // namespace foldcheck::cli
