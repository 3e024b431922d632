// The program around the subcommands (app.hpp).
#include "app.hpp"

#include <malloc.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <iostream>
#include <map>
#include <new>

#include "common.hpp"
#include "foldcheck/base/errors.hpp"
#include "foldcheck/base/version.hpp"
#include "foldcheck/io/limits.hpp"
#include "foldcheck/reference/conv_bn_reference.hpp"

namespace foldcheck::cli {
namespace {

// Without a command, name what was given instead of CLI11's "A subcommand is required".
std::string no_command_message(const CLI::App& app, const CLI::ParseError& e, int argc, char** argv) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) names.push_back(sub->get_name());
  const std::string commands = fmt::format("(commands: {}; see 'foldcheck --help')", fmt::join(names, ", "));
  std::string given;  // the first word that is not a program option or its value
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--max-elements") {
      ++i;
      continue;
    }
    if (!a.empty() && a[0] == '-') continue;
    given = a;
    break;
  }
  if (!given.empty()) return fmt::format("unknown command '{}' {}", one_line(given), commands);
  if (dynamic_cast<const CLI::RequiredError*>(&e)) return "a command is required " + commands;
  return one_line(e.what());
}

// The flag of each field the library names in its messages (errors.hpp field()). One
// table: a field means the same flag in every command that has it.
const std::map<std::string, std::string>& flag_of_field() {
  static const std::map<std::string, std::string> flags{
      {"original", "--original"},       {"observed", "--observed"},     {"observed_output", "--observed-output"},
      {"input", "--input"},             {"x", "--input"},               {"weights", "--weights"},
      {"weights_only", "--weights-only"}, {"conv_bias", "--bias"},      {"padding", "--padding"},
      {"stride", "--stride"},           {"model", "--model"},           {"dtype", "--dtype"},
      {"command", "--cmd"},             {"passes", "--passes"},         {"opt_level", "--opt-level"},
      {"timeout_seconds", "--timeout"}, {"threshold_ulp", "--threshold-ulp"}, {"shard", "--shard"},
      {"max_elements", "--max-elements"}, {"work_dir", "--work-dir"},   {"engines", "--engine or --adapter"},
      {"adapters", "--adapter"},        {"dilation", "--dilation"}};
  return flags;
}

}  // namespace

std::string flag_for_field(const std::string& name) {
  const auto f = flag_of_field().find(name);
  return f == flag_of_field().end() ? std::string() : f->second;
}

void add_program_options(CLI::App& app, ProgramOptions& p) {
  set_field_namer(flag_for_field);  // library messages name the flags (errors.hpp)
  app.description("foldcheck — is a conv+BatchNorm drift the rounding IEEE arithmetic predicts, or a bug?\n"
                  "Exit codes: 0 the verdict is EXPECTED; 1 it is SUSPICIOUS, UNEXPECTED or MISTRUSTED (bisect: also "
                  "when a pass is named; compare: a regression); 2 bad usage or input.");
  app.name("foldcheck");
  app.set_version_flag("--version", std::string("foldcheck ") + kVersion);
  app.require_subcommand(1);
  app.fallthrough();  // program options are accepted before or after the subcommand
  app.add_option("--max-elements", p.max_elements,
                 "Refuse any tensor (in a file, a model or a case) with more elements than this, before allocating it "
                 "(default 2^28 = 268435456, or FOLDCHECK_MAX_ELEMENTS; at most 2^40)")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            return parse_element_limit(text) ? "" : fmt::format("must be {}, got '{}'", kElementLimitRange, text);
          },
          "N"));
}

std::optional<int> parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    const std::string message = app.get_subcommands().empty() ? no_command_message(app, e, argc, argv) : one_line(e.what());
    std::cerr << "foldcheck: error: " << message << "\n";
    return 2;
  }
  return std::nullopt;
}

int run_chosen(const CLI::App& app, const ProgramOptions& p, const std::vector<std::unique_ptr<Command>>& commands) {
  try {
    set_max_elements(p.max_elements > 0 ? p.max_elements : max_elements_from_environment());
    (void)ref::isa_level();  // a FOLDCHECK_ISA that names no level, or one this CPU lacks: refused before any work
    refuse_outputs_that_are_inputs(app);
    for (const auto& c : commands)
      if (c->chosen()) return c->run();
  } catch (const std::bad_alloc&) {
    // Sizes are checked against the element limit and the machine's memory before large
    // allocations; this is what is left (many tensors each under the limit).
    std::cerr << "foldcheck: error: out of memory: the inputs need more memory than this machine has (a lower "
                 "--max-elements refuses large tensors before allocating them)\n";
    return 2;
  } catch (const std::exception& e) {
    // InputError (bad input), domain_error (an impossible request) or a library's error: all
    // one line naming the input, exit 2.
    std::cerr << "foldcheck: error: " << one_line(e.what()) << "\n";
    return 2;
  }
  return 2;
}

}  // namespace foldcheck::cli
