#pragma once
// A ResNet-50-shaped model in foldcheck's model IR (torchvision's layout: 7x7 stem, max
// pool, bottleneck stages [3, 4, 6, 3] with 1x1 -> 3x3 -> 1x1 convs, each followed by a
// BatchNormalization, projection shortcuts, global average pool, fully connected), with
// seeded random weights (He-normal) and BatchNorm statistics, for the end-to-end
// benchmarks. Built in memory: no ONNX file, no PyTorch.
#include <cstdint>

#include "foldcheck/model/model.hpp"

namespace foldcheck::bench {

Model resnet50_model(std::int64_t image = 224, std::uint64_t seed = 1);

}  // namespace foldcheck::bench
