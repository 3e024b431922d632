#pragma once
// ResNet-50- and ResNet-18-shaped models in foldcheck's model IR (torchvision's layout: 7x7 stem, max
// pool, bottleneck stages [3, 4, 6, 3] with 1x1 -> 3x3 -> 1x1 convs, each followed by a
// BatchNormalization, projection shortcuts, global average pool, fully connected), with
// seeded random weights (He-normal) and BatchNorm statistics, for the end-to-end
// benchmarks. Built in memory: no ONNX file, no PyTorch.
#include <cstdint>

#include "foldcheck/model/model.hpp"

namespace foldcheck::bench {

Model resnet50_model(std::int64_t image = 224, std::uint64_t seed = 1);
// ResNet-18: basic blocks [2, 2, 2, 2] (3x3 -> 3x3), 1.82 G multiply-adds at 224x224.
Model resnet18_model(std::int64_t image = 224, std::uint64_t seed = 1);

}  // namespace foldcheck::bench
