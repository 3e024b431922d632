#pragma once
// Layer names short enough for a table column and still telling the layers apart: each
// name's shortest suffix of '/'-separated components that no other name ends with
// ("layer2.0/downsample/downsample.0/Conv" for ResNet-18's second downsample, where
// "downsample.0/Conv" names three); one still wider than the column keeps its first
// (distinguishing) component and as many of its last ones as fit, the middle elided
// ("layer2.0/…/downsample.0/Conv"). Width counts characters (UTF-8 code points).
#include <string>
#include <vector>

namespace foldcheck::reports {

std::vector<std::string> short_layer_names(const std::vector<std::string>& names, std::size_t width);

}  // namespace foldcheck::reports
