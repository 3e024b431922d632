// The English of an accuracy-diff that found no layer -> BatchNormalization pair (no_pairs_reasoning.hpp).
#include "foldcheck/reports/no_pairs_reasoning.hpp"

#include <fmt/format.h>

namespace foldcheck::reports {

std::vector<std::string> no_pairs_reasoning(const NoPairsFacts& f) {
  if (f.observed_pairs && *f.observed_pairs > 0)
    return {fmt::format("No layer -> BatchNormalization pair in {}, but the observed model {} has {}: are the two "
                        "swapped?",
                        f.model, f.observed, *f.observed_pairs),
            "accuracy-diff takes the original model (BatchNorms kept) first and the folded one with --observed."};
  if (f.foldable_layers == 0)
    return {fmt::format("{} has no foldable layer (Conv, ConvTranspose, Gemm or MatMul with initializer weights): "
                        "there is no BatchNorm fold to check.",
                        f.model)};
  // A BatchNorm that follows a layer that cannot take its fold (a Gemm with alpha != 1): that is
  // the answer, not a fold done before the file was written (nor advice to export again).
  if (!f.unfoldable.empty())
    return {
        fmt::format("No layer -> BatchNormalization pair in {}: {}: the BatchNormalization follows a layer its "
                    "fold cannot be written into, so there is no fold to check (see unpaired).",
                    f.model, f.unfoldable)};
  // A BatchNorm that pairs with no layer is said with its reason: "no BatchNormalization
  // follows" would contradict the model.
  const std::string none =
      f.first_unpaired.empty()
          ? fmt::format("no BatchNormalization follows any of its {} foldable layer(s)", f.foldable_layers)
          : fmt::format(
                "none of its {} BatchNormalization node(s) pairs with one of its {} foldable "
                "layer(s) ({}; see unpaired)",
                f.batchnorms, f.foldable_layers, f.first_unpaired);
  const std::string why = fmt::format(
      "No layer -> BatchNormalization pair in {}: {}. Either the model has none to fold, or they were folded "
      "before the file was written{}.",
      f.model, none,
      f.producer == "pytorch" ? " (torch.onnx.export folds them by default: eval mode and constant folding)" : "");
  if (f.producer == "pytorch")
    return {why, "Export with the BatchNorms kept: torch.onnx.export(model, args, path, dynamo=False, "
                 "training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False), or "
                 "foldcheck.torch.export_onnx(model, x, path); then give the folded model with --observed."};
  return {why, "Export the model with its BatchNormalization nodes kept (no constant folding, no fusion) and give "
               "the folded model with --observed."};
}

}  // namespace foldcheck::reports
