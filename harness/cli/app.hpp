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

// The app's description, --version and the options accepted before or after a subcommand;
// installs flag_for_field as the library's field namer.
void add_program_options(CLI::App& app, ProgramOptions& p);

// Parses; the exit code when the program ends here (help, version: 0; a parse error: one
// line naming the unknown command or the flag, 2), nullopt when a command is to run.
std::optional<int> parse(CLI::App& app, int argc, char** argv);

// The flag that sets a library field ("observed" -> "--observed"), or "" (errors.hpp
// field(): the library's messages then name the flag; installed by add_program_options).
std::string flag_for_field(const std::string& name);

// Runs the chosen command: errors become one line on stderr and exit 2.
int run_chosen(const CLI::App& app, const ProgramOptions& p, const std::vector<std::unique_ptr<Command>>& commands);

}  // namespace foldcheck::cli
