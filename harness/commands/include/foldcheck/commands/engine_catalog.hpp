#pragma once
// The built-in engines of `foldcheck engines`: what each name stands for, as adapter commands
// (the protocol of adapters/README.md). One catalogue for the `foldcheck` program and the
// Python module; each says where its Python, its adapters and foldcheck-onednn are
// (EngineTools), the catalogue only spells the commands.
//
// Contract: builtin_engine(name) returns one EngineSpec per run the name stands for
// (`onednn` is four runs, one per fold recipe), each command with {model}, {input} and
// {outdir} left for engines() to substitute; an unknown name, or oneDNN when no
// foldcheck-onednn was built, throws InputError naming the `engines` field.
#include <string>
#include <vector>

#include "foldcheck/commands/engines.hpp"

namespace foldcheck {

struct EngineTools {
  std::string python;        // runs the Python adapters
  std::string adapters_dir;  // holds onnxruntime_engine.py, ...
  std::string onednn;        // foldcheck-onednn, or "" when it was not built
};

std::vector<std::string> builtin_engine_names();
std::vector<EngineSpec> builtin_engine(const std::string& name, const EngineTools& tools);
// engines' run list from built-in names and own adapters: labels unique, at least one engine.
// An own adapter is held to one rule, whichever surface gives it (the CLI's --adapter
// LABEL=COMMAND, the Python layer's {label: command}): its label is not empty or blank and
// holds no '=' (the CLI could not spell it: the Python layer's {"a=b": cmd} ran as label 'a'
// with command "b=cmd") nor a control character (a label is shown on one line of every
// report); its command is not blank and holds no NUL (the shell would run what comes before
// it). InputError naming the `adapters` field and the label otherwise.
std::vector<EngineSpec> engine_list(const std::vector<std::string>& names, const std::vector<EngineSpec>& adapters,
                                    const EngineTools& tools);
// The same from the CLI's "LABEL=COMMAND" words (split at the first '=').
std::vector<EngineSpec> engine_list(const std::vector<std::string>& names, const std::vector<std::string>& adapters,
                                    const EngineTools& tools);

}  // namespace foldcheck
