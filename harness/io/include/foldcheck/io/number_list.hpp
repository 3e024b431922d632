#pragma once
// Numbers from the command line: a comma-separated list ("2.1122932,5.5735774") or the
// path of a .npy file. Malformed input is an InputError naming the flag.
#include <optional>
#include <string>
#include <vector>

#include "foldcheck/numerics/tensor.hpp"

namespace foldcheck {

// The items of a comma-separated list of names ("SimplifyInference,FoldScaleAxis"), empty
// items kept ("A,,B" has three, the second empty) for the caller to refuse; "" has none.
// A list (names or numbers) of more items than max_elements() (limits.hpp) is an InputError
// naming `what` (the flag), refused before any item is stored.
std::vector<std::string> split_names(const std::string& text, const std::string& what);

std::vector<double> parse_number_list(const std::string& text, const std::string& what);
// A .npy path (if it ends in .npy) or a comma list; `shape` receives the .npy shape or {n}.
// shape and dtype, when given, receive the .npy's (a list: its length, and nullopt).
std::vector<double> load_values(const std::string& arg, const std::string& what, Shape* shape = nullptr,
                                std::optional<DType>* dtype = nullptr);

}  // namespace foldcheck
