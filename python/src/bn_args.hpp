#pragma once
// The BatchNorm arguments of the core's functions (bind_layer.cpp, bind_fold.cpp).
#include <optional>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "foldcheck/io/bn_params.hpp"

namespace foldcheck::py {

using OptArray = std::optional<pybind11::array>;

// The BatchNorm arguments as the library's one rule reads them (bn_params.hpp): each given
// array replaces a fresh BatchNorm's default, one value broadcasts to every channel; eps is a
// number or None (scalars.hpp).
BnSources bn_sources(const OptArray& gamma, const OptArray& beta, const OptArray& mean, const OptArray& var,
                     const pybind11::handle& eps);

}  // namespace foldcheck::py
