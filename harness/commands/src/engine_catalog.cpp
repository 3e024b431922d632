// The built-in engines (engine_catalog.hpp): adapters in adapters/ and foldcheck-onednn.
#include "foldcheck/commands/engine_catalog.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include <fmt/format.h>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/platform/process.hpp"

namespace foldcheck {
namespace {

namespace fs = std::filesystem;
using command::shell_quote;

const char* kIo = " {model} {input} {outdir}";

// Each built-in name's runs: a label, the adapter (a Python script in the adapters' directory,
// or foldcheck-onednn) and the adapter's own arguments. The arguments are the adapters' flags,
// not foldcheck's (the layering check exempts lines marked "adapter's flags").
struct Run {
  const char* name;   // the built-in name it belongs to
  const char* label;  // the run's label in the report
  const char* script; // nullptr: foldcheck-onednn
  const char* args;
};
constexpr Run kRuns[] = {
    {"onnxruntime:basic", "onnxruntime:basic", "onnxruntime_engine.py", "--level basic"},           // adapter's flags
    {"onnxruntime:extended", "onnxruntime:extended", "onnxruntime_engine.py", "--level extended"},  // adapter's flags
    {"onnxruntime:all", "onnxruntime:all", "onnxruntime_engine.py", "--level all"},                 // adapter's flags
    {"onnxoptimizer", "onnxoptimizer", "onnxoptimizer_engine.py", ""},
    {"openvino", "openvino", "openvino_engine.py", "--precision f32"},  // adapter's flags
    // oneDNN: the direct float32 convolution with the folded weights of each recipe; its
    // Winograd algorithm (F(2x2,3x3) or F(4x4,3x3), per layer) and its bfloat16 direct
    // convolution with ONNX Runtime's fold.
    {"onednn", "onednn:direct:f32:pytorch", nullptr,
     "--algorithm direct --dtype f32 --recipe pytorch"},                                          // adapter's flags
    {"onednn", "onednn:direct:f32:tvm", nullptr, "--algorithm direct --dtype f32 --recipe tvm"},  // adapter's flags
    {"onednn", "onednn:direct:f32:onnxruntime", nullptr,
     "--algorithm direct --dtype f32 --recipe onnxruntime"},  // adapter's flags
    {"onednn", "onednn:direct:f32:onnxoptimizer", nullptr,
     "--algorithm direct --dtype f32 --recipe onnxoptimizer"},  // adapter's flags
    {"onednn:winograd", "onednn:winograd:f32:onnxruntime", nullptr,
     "--algorithm winograd --dtype f32 --recipe onnxruntime"},  // adapter's flags
    {"onednn:bf16", "onednn:direct:bf16:onnxruntime", nullptr,
     "--algorithm direct --dtype bf16 --recipe onnxruntime"},  // adapter's flags
    // float32 memory under fpmath_mode bf16 (bf16 operands on CPUs with AVX512-BF16).
    {"onednn:fpmath-bf16", "onednn:direct:fpmath-bf16:onnxruntime", nullptr,
     "--algorithm direct --dtype f32 --fpmath bf16 --recipe onnxruntime"},  // adapter's flags
};

std::string known_names() {
  std::string known;
  for (const std::string& k : builtin_engine_names()) known += (known.empty() ? "" : ", ") + k;
  return known;
}

}  // namespace

std::vector<std::string> builtin_engine_names() {
  std::vector<std::string> r;
  for (const Run& run : kRuns)
    if (r.empty() || r.back() != run.name) r.push_back(run.name);
  return r;
}

// `onnxruntime` alone is ONNX Runtime's basic level, labelled as asked.
std::vector<EngineSpec> builtin_engine(const std::string& asked, const EngineTools& tools) {
  const std::string n = asked == "onnxruntime" ? "onnxruntime:basic" : asked;
  std::vector<EngineSpec> r;
  for (const Run& run : kRuns) {
    if (n != run.name) continue;
    if (!run.script && tools.onednn.empty())
      throw InputError(field("engines") + " " + n + ": foldcheck-onednn was not built (configure with "
                       "-DFOLDCHECK_BUILD_ONEDNN=ON; it needs libdnnl-dev, which tools/bootstrap.sh test installs)");
    const std::string program = run.script ? shell_quote(tools.python) + " " +
                                                 shell_quote((fs::path(tools.adapters_dir) / run.script).string())
                                           : shell_quote(tools.onednn);
    const std::string args = *run.args ? std::string(" ") + run.args : "";
    r.push_back({asked == "onnxruntime" ? asked : run.label, program + args + kIo});
  }
  if (r.empty()) throw InputError("unknown engine '" + asked + "' (known: " + known_names() + "; or give your own adapter)");
  return r;
}

namespace {

// A label in a message: its control characters as \xNN (the message stays one line).
std::string shown_label(const std::string& label) {
  std::string r;
  for (const unsigned char c : label)
    r += c < 0x20 || c == 0x7f ? fmt::format("\\x{:02x}", c) : std::string(1, static_cast<char>(c));
  return r;
}

// An own adapter's label and command (engine_catalog.hpp's rule for both surfaces).
void check_adapter(const EngineSpec& a) {
  const std::string where = field("adapters") + " '" + shown_label(a.label) + "'";
  auto blank = [](const std::string& t) {
    return std::all_of(t.begin(), t.end(), [](unsigned char c) { return std::isspace(c) != 0; });
  };
  if (blank(a.label)) throw InputError(where + ": a label is empty or blank");
  if (a.label.find('=') != std::string::npos)
    throw InputError(where + ": a label holds no '=' (it is the LABEL of LABEL=COMMAND)");
  if (std::any_of(a.label.begin(), a.label.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; }))
    throw InputError(where + ": a label holds no control characters (it is shown on one line of the report)");
  if (blank(a.command)) throw InputError(where + ": its command is empty or blank");
  if (a.command.find('\0') != std::string::npos)
    throw InputError(where + ": its command holds a NUL character (the shell would run only what comes before it)");
}

}  // namespace

std::vector<EngineSpec> engine_list(const std::vector<std::string>& names, const std::vector<EngineSpec>& adapters,
                                    const EngineTools& tools) {
  std::vector<EngineSpec> r;
  for (const std::string& n : names)
    for (EngineSpec& e : builtin_engine(n, tools)) r.push_back(std::move(e));
  for (const EngineSpec& a : adapters) {
    check_adapter(a);
    r.push_back(a);
  }
  for (std::size_t i = 0; i < r.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (r[i].label == r[j].label)
        throw InputError("engines: '" + r[i].label + "' is given twice (labels name the engines in the report)");
  if (r.empty()) throw InputError("engines: give at least one engine or adapter");
  return r;
}

std::vector<EngineSpec> engine_list(const std::vector<std::string>& names, const std::vector<std::string>& adapters,
                                    const EngineTools& tools) {
  std::vector<EngineSpec> own;
  for (const std::string& a : adapters) {
    const std::size_t eq = a.find('=');
    if (eq == 0 || eq == std::string::npos || eq + 1 == a.size())
      throw InputError(field("adapters") + ": expected LABEL=COMMAND, got '" + a + "'");
    own.push_back({a.substr(0, eq), a.substr(eq + 1)});
  }
  return engine_list(names, own, tools);
}

}  // namespace foldcheck
