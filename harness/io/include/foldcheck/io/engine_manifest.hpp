#pragma once
// What an engine adapter wrote: the adapter protocol's manifest (adapters/README.md).
//
// An adapter is a command run with {model}, {input} and {outdir}; it leaves in OUTDIR a
// manifest.json:
//   protocol          1
//   engine            the engine's name, version and setting ("onnxruntime 1.32.0 (basic)")
//   folded_model      optional: the model as the engine folded and wrote it (.onnx)
//   values_of         "folded_model" or "model": whose value names `values` uses
//   outputs           {graph output name: .npy} the engine's final outputs of its fused run
//   values            {value name: .npy} per-layer values: each conv's input and output
//   layers            {layer: {"input": .npy, "output": .npy}} the same keyed by layer (the conv
//                     node's name, or its output's when it has none, in the values_of model):
//                     for adapters that run each layer on its own (a per-layer differential),
//                     where a layer's input and the previous layer's output are not one tensor
//   fusion_preserved  optional: whether the run that produced `values` gave final outputs
//                     bit-identical to the fused run's (false: the values are not the fused
//                     computation's, and are not judged)
//   fold_recipe       optional: the recipe the engine folded by (recipes.hpp names), when the
//                     adapter knows it: the layers are held to that recipe's bounds only
//   weight_dtype      optional: "float32" (default), "bfloat16" or "float16": the folded
//                     weights' storage, a rounding the layers' bounds then include
//   accumulation      optional: the conv algorithm of every layer where it applies: "direct"
//                     (default: a dot product in any order, split-k too), "winograd_f2x3",
//                     "winograd_f4x3", "winograd_f6x3" (Winograd F(m x m,3x3), 3x3 stride-1
//                     convs: winograd_bound.hpp; F(2x2): evaluate.hpp's), "winograd_f4x3_onednn"
//                     (oneDNN's F(4x4,3x3), other interpolation points) or "fft" (stride 1:
//                     fft_bound.hpp); a layer of `layers` may name its own (oneDNN picks
//                     per layer): {"input", "output", "accumulation"}
//   arithmetic        optional: the arithmetic of the convs' products and sums, one of
//                     conv_arithmetic.hpp's names ("float32" default, "tf32", "bf16", "fp16",
//                     "fp16-accumulate", "bf16x3")
//   left_out          optional: {value name: reason}, layer outputs the engine did not compute
//                     (an algorithm it does not offer for that layer): reported, not judged
//   notes             optional list of strings, shown to the user
// Contract: every file named is a relative path inside OUTDIR (no absolute path, no "..");
// a key the protocol does not have (a typo: "fusion_preserverd") is refused, naming it, as
// is a manifest breaking any other rule (InputError naming manifest.json and the field).
// Every file of the adapter, manifest.json included, is read by read_adapter_file alone:
// the one rule of contained_file.hpp (inside OUTDIR with links resolved, a regular file
// opened without blocking, size-limited). The named files are read when used. Whether the
// value names are names of the model is checked by the engines command, which has the models.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "foldcheck/numerics/conv_arithmetic.hpp"

namespace foldcheck {

struct EngineManifest {
  std::string dir;                          // OUTDIR
  std::string engine;
  std::optional<std::string> folded_model;  // full path
  bool values_of_folded = false;
  std::map<std::string, std::string> outputs, values;  // value name -> full path
  struct LayerFiles {
    std::string input, output;               // full paths
    std::optional<ConvAlgorithm> algorithm;  // its own accumulation
  };
  std::map<std::string, LayerFiles> layers;
  std::optional<bool> fusion_preserved;
  std::optional<std::string> fold_recipe, weight_dtype;
  std::optional<ConvAlgorithm> algorithm;    // accumulation (Winograd2/4/6, FFT, Direct), when given
  std::optional<ConvArithmetic> arithmetic;  // when given
  std::map<std::string, std::string> left_out;
  std::vector<std::string> notes;
};

EngineManifest read_engine_manifest(const std::string& dir);

// A file the adapter wrote (its manifest, folded model, values), under the one rule of
// contained_file.hpp with OUTDIR `man.dir`; `kind` names it in messages (".npy file").
std::string read_adapter_file(const EngineManifest& man, const std::string& path, const std::string& kind);

}  // namespace foldcheck
