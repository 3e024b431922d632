#pragma once
// Why an accuracy-diff compared nothing (MISTRUSTED: nothing compared is never a pass), and
// what to do: written here with the rest of foldcheck's wording for people, from the facts
// the harness found (harness/commands/src/accuracy_diff.cpp), put into the result's "reasoning".
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace foldcheck::reports {

struct NoPairsFacts {
  std::string model;                    // its path, as given
  std::string producer;                 // the ONNX producer_name ("pytorch", "tf2onnx", ...)
  std::size_t foldable_layers = 0;      // Conv, ConvTranspose, Gemm, MatMul with initializer weights
  std::size_t batchnorms = 0;           // BatchNormalization nodes (all unpaired here)
  std::string first_unpaired;           // the first one's name and why it pairs with no layer ("" none)
  std::string unfoldable;               // the first that follows a layer that cannot take its fold, and why ("" none)
  std::optional<std::size_t> observed_pairs;  // --observed: that model's layer -> BatchNormalization pairs
  std::string observed;                 // its path
};

// Two sentences at most: why no pair was found, then what to do.
std::vector<std::string> no_pairs_reasoning(const NoPairsFacts& f);

}  // namespace foldcheck::reports
