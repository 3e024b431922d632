#pragma once
// The `foldcheck` program around its subcommands: the app with its program-wide options,
// parsing with one-line errors, and running the chosen command with its errors mapped to
// exit codes (0 EXPECTED; 1 SUSPICIOUS, UNEXPECTED or MISTRUSTED, or a named pass or a
// regression; 2 bad usage or bad input, one line on stderr, no output file written).
#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "command.hpp"

namespace foldcheck::cli {

struct ProgramOptions {
  std::int64_t max_elements = 0;  // 0: FOLDCHECK_MAX_ELEMENTS or the default
};

// The app's description, --version and the options accepted before or after a subcommand.
void add_program_options(CLI::App& app, ProgramOptions& p);

// Parses; the exit code when the program ends here (help, version: 0; a parse error: one
// line naming the unknown command or the flag, 2), nullopt when a command is to run.
std::optional<int> parse(CLI::App& app, int argc, char** argv);

// A library message with each field it names ("`observed`", errors.hpp) shown as its flag
// ("--observed"); a field without a flag keeps its backquotes.
std::string flags_for_fields(const std::string& message);

// Runs the chosen command: errors become one line on stderr (fields as flags) and exit 2.
int run_chosen(const CLI::App& app, const ProgramOptions& p, const std::vector<std::unique_ptr<Command>>& commands);

}  // namespace foldcheck::cli
