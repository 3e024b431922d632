// foldcheck: is a conv+BatchNorm drift the rounding IEEE arithmetic predicts, or a bug?
// The program: its options and subcommands (command.hpp: one file per subcommand), parsed,
// then the chosen one run (app.hpp: exit codes 0 EXPECTED, 1 not, 2 bad usage or input).
#include <malloc.h>

#include "app.hpp"
#include "command.hpp"

int main(int argc, char** argv) {
  // Keep freed memory for reuse instead of returning it to the OS: a layer's reference and
  // paths allocate tens of MB, and faulting fresh pages back in on every use was measured
  // at ~40 ns per output (more than certifying it). glibc: serve large blocks from the
  // heap (no mmap) and never trim it.
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  CLI::App app;
  foldcheck::cli::ProgramOptions program;
  foldcheck::cli::add_program_options(app, program);
  const auto commands = foldcheck::cli::all_commands();
  for (const auto& c : commands) c->add_to(app);
  if (const auto rc = foldcheck::cli::parse(app, argc, argv)) return *rc;
  return foldcheck::cli::run_chosen(app, program, commands);
}
