#pragma once
// oneDNN's f32 convolution on foldcheck's tensors: the machine's practical speed limit
// (a benchmark-only dependency). Data is reordered into the primitive's preferred
// layouts once; run() executes only the convolution.
#include <cstdint>
#include <memory>
#include <vector>

#include "foldcheck/reference/layer.hpp"

namespace foldcheck::bench {

class OneDnnConv {
 public:
  OneDnnConv(const ref::ConvGeometry& g, const std::vector<double>& x, const std::vector<double>& w);
  ~OneDnnConv();
  void run();
  std::vector<float> output() const;  // NCHW

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace foldcheck::bench
