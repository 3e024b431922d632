#pragma once
// The text of a model's calibrated band (views AdiffBand, model/output_band.hpp), one renderer
// for accuracy-diff's observed output and the engines command's final outputs.
#include <string>

#include "foldcheck/result/views/accuracy_diff.hpp"

namespace foldcheck::reports {

// The band's lines, each starting with `indent`: why none, or the directions beyond it (the
// named one first: the change that alone explains most of the output's, then by ratio), or the
// floor it sees and the direction closest to its band.
std::string output_band_text(const result::views::AdiffBand& b, const std::string& indent);

}  // namespace foldcheck::reports
