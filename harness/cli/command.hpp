#pragma once
// One subcommand of `foldcheck`, with the same two hooks in every one (one file each:
// NAME_command.cpp):
//   add_to(app)  declares the subcommand on the app: its flags, their checks and help;
//   run()        runs it once the command line is parsed, and returns the exit code: 0 the
//                verdict is EXPECTED, 1 it is SUSPICIOUS, UNEXPECTED or MISTRUSTED. Bad input
//                is thrown (InputError naming the flag or file) and main makes it exit 2.
// Only this layer knows the flags: it maps them to the library's fields and names them in
// messages; the library (harness/commands/ and below) names fields and files.
#include <CLI/CLI.hpp>
#include <memory>
#include <vector>

namespace foldcheck::cli {

class Command {
 public:
  virtual ~Command() = default;
  virtual void add_to(CLI::App& app) = 0;
  virtual int run() = 0;
  bool chosen() const { return cmd_ != nullptr && static_cast<bool>(*cmd_); }

 protected:
  CLI::App* cmd_ = nullptr;
};

std::unique_ptr<Command> explain_command();
std::unique_ptr<Command> run_command();
std::unique_ptr<Command> diagnose_command();
std::unique_ptr<Command> accuracy_diff_command();
std::unique_ptr<Command> engines_command();
std::unique_ptr<Command> suite_command();
std::unique_ptr<Command> merge_command();
std::unique_ptr<Command> compare_command();
std::unique_ptr<Command> bisect_command();
std::unique_ptr<Command> quant_command();

// Every subcommand, in the order `foldcheck --help` lists them.
std::vector<std::unique_ptr<Command>> all_commands();

}  // namespace foldcheck::cli
