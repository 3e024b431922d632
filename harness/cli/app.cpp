// The program around the subcommands (app.hpp).
#include "app.hpp"

#include <malloc.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <iostream>
#include <algorithm>
#include <map>
#include <new>

#include "common.hpp"
#include "foldcheck/base/errors.hpp"
#include "foldcheck/base/version.hpp"
#include "foldcheck/io/limits.hpp"
#include "foldcheck/reference/conv_bn_reference.hpp"

namespace foldcheck::cli {
namespace {

// Edit distance (insertions, deletions, substitutions, transpositions of neighbours).
std::size_t distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

// The command a mistyped word most likely meant: the nearest within a third of its length
// (at least 2 edits), or one it begins; "" for none.
std::string nearest_command(const std::string& given, const std::vector<std::string>& names) {
  std::string best;
  std::size_t best_d = std::max<std::size_t>(2, given.size() / 3) + 1;
  for (const std::string& n : names) {
    const std::size_t d = n.rfind(given, 0) == 0 && given.size() >= 3 ? 1 : distance(given, n);
    if (d < best_d) {
      best_d = d;
      best = n;
    }
  }
  return best;
}

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
  if (!given.empty()) {
    const std::string near = nearest_command(given, names);
    return fmt::format("unknown command '{}'{} {}", one_line(given), near.empty() ? "" : "; did you mean '" + near + "'?",
                       commands);
  }
  if (dynamic_cast<const CLI::RequiredError*>(&e)) return "a command is required " + commands;
  return one_line(e.what());
}

// The flag of each field the library names in its messages (errors.hpp field()). One
// table: a field means the same flag in every command that has it.
const std::map<std::string, std::string>& flag_of_field() {
  // A table, aligned by hand.
  // clang-format off
  static const std::map<std::string, std::string> flags{
      {"original", "--original"},       {"observed", "--observed"},     {"observed_output", "--observed-output"},
      {"input", "--input"},             {"x", "--input"},               {"weights", "--weights"},
      {"weights_only", "--weights-only"}, {"conv_bias", "--bias"},      {"padding", "--padding"},
      {"stride", "--stride"},           {"model", "--model"},           {"dtype", "--dtype"},
      {"command", "--cmd"},             {"passes", "--passes"},         {"opt_level", "--opt-level"},
      {"timeout_seconds", "--timeout"}, {"threshold_ulp", "--threshold-ulp"}, {"shard", "--shard"},
      {"max_elements", "--max-elements"}, {"work_dir", "--work-dir"},   {"engines", "--engine or --adapter"},
      {"adapters", "--adapter"},        {"dilation", "--dilation"},     {"arithmetic", "--arithmetic"}, {"algorithm", "--algorithm"},
      {"conversion", "--conversion"}};
  // clang-format on
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
    // Within a command, a usage error (a missing or unexpected argument) points to that
    // command's help; a refused value names its flag and the problem already.
    std::string message = app.get_subcommands().empty() ? no_command_message(app, e, argc, argv) : one_line(e.what());
    if (!app.get_subcommands().empty() && !dynamic_cast<const CLI::ValidationError*>(&e))
      message += fmt::format(" (see 'foldcheck {} --help')", app.get_subcommands().front()->get_name());
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
