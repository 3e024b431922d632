#include "foldcheck/io/number_list.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include <fmt/format.h>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/io/limits.hpp"
#include "foldcheck/io/npy.hpp"

namespace foldcheck {
namespace {

// A list typed on the command line is held to the element limit as a tensor read from a file
// is (limits.hpp), counted from its commas before any item is stored.
void check_list_length(const std::string& text, const std::string& what) {
  const auto items = static_cast<std::int64_t>(std::count(text.begin(), text.end(), ',')) + 1;
  if (items > max_elements())
    throw InputError(fmt::format(fmt::runtime("{}: a list of {} items, over the limit of {} (raise it with " +
                                              field("max_elements") + " or FOLDCHECK_MAX_ELEMENTS)"),
                                 what, items, max_elements()));
}

}  // namespace

std::vector<std::string> split_names(const std::string& text, const std::string& what) {
  std::vector<std::string> r;
  if (text.empty()) return r;
  check_list_length(text, what);
  for (std::size_t pos = 0;;) {
    const std::size_t comma = text.find(',', pos);
    r.push_back(text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    if (comma == std::string::npos) return r;
    pos = comma + 1;
  }
}

std::vector<double> parse_number_list(const std::string& text, const std::string& what) {
  std::vector<double> out;
  std::size_t pos = 0;
  if (text.find_first_not_of(" \t,") == std::string::npos) throw InputError(what + ": empty number list");
  check_list_length(text, what);
  while (pos <= text.size()) {
    const std::size_t comma = text.find(',', pos);
    std::string tok = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    tok.erase(0, tok.find_first_not_of(" \t"));
    tok.erase(tok.find_last_not_of(" \t") + 1);
    if (tok.empty()) throw InputError(what + ": empty entry at position " + std::to_string(out.size() + 1));
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(tok.c_str(), &end);
    if (end != tok.c_str() + tok.size()) throw InputError(what + ": '" + tok + "' is not a number");
    if (errno == ERANGE && std::isinf(v)) throw InputError(what + ": '" + tok + "' is out of range");
    out.push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

std::vector<double> load_values(const std::string& arg, const std::string& what, Shape* shape, std::optional<DType>* dtype) {
  if (dtype) *dtype = std::nullopt;
  if (arg.size() > 4 && arg.substr(arg.size() - 4) == ".npy") {
    Tensor t = read_npy(arg);  // read once: the path may be a pipe
    if (t.data.empty()) throw InputError(arg + ": " + what + " is empty");
    if (shape) *shape = t.shape;
    if (dtype) *dtype = t.dtype;
    return t.data;
  }
  std::vector<double> v = parse_number_list(arg, what);
  if (shape) *shape = {static_cast<std::int64_t>(v.size())};
  return v;
}

}  // namespace foldcheck
