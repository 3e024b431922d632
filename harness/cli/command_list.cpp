// Every subcommand of `foldcheck` (command.hpp), in the order of its help.
#include "command.hpp"

namespace foldcheck::cli {

std::vector<std::unique_ptr<Command>> all_commands() {
  std::vector<std::unique_ptr<Command>> c;
  c.push_back(explain_command());
  c.push_back(run_command());
  c.push_back(diagnose_command());
  c.push_back(accuracy_diff_command());
  c.push_back(engines_command());
  c.push_back(suite_command());
  c.push_back(merge_command());
  c.push_back(compare_command());
  c.push_back(bisect_command());
  c.push_back(quant_command());
  return c;
}

}  // namespace foldcheck::cli
