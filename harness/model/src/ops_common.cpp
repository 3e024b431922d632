// What every op family shares (ops_common.hpp): the run's values and the checked shape
// arithmetic.
#include "ops_common.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/io/limits.hpp"

namespace foldcheck::ops {
namespace {

// Every value an op reads holds exactly the elements its shape says (an integer
// initializer whose dims and values disagree, a scalar with no value): the ops index by
// shape, so a shorter vector would be read past its end.
const Tensor& consistent(const Tensor& t, const std::string& name, const std::string& who) {
  std::uint64_t n = 1;
  for (const std::int64_t d : t.shape) {
    if (d < 0 || (d > 0 && n > UINT64_MAX / static_cast<std::uint64_t>(d))) n = UINT64_MAX;
    else n *= static_cast<std::uint64_t>(d);
  }
  if (n != t.data.size())
    throw InputError(fmt::format("{}: value {} has shape {} but {} values", who, name, shape_string(t.shape), t.data.size()));
  return t;
}

}  // namespace

template <class T>
const Tensor& OpRun<T>::get(const std::string& name, const std::string& who) {
  if (const auto it = env_.find(name); it != env_.end()) return consistent(it->second, name, who);
  if (const Tensor* t = m_.initializer(name)) return consistent(*t, name, who);
  Shape shape;
  if (const auto* ints = m_.int_initializer(name, &shape)) {
    Tensor t;
    t.shape = shape;
    for (const auto v : *ints) t.data.push_back(static_cast<double>(v));
    t.dtype = DType::Float64;
    held_ += t.data.size();
    return consistent(env_[name] = t, name, who);
  }
  throw InputError(fmt::format("{}: value {} is not available (not computed, not an initializer)", who, name));
}

template <class T>
std::vector<std::int64_t> OpRun<T>::ints(const std::string& name, const std::string& who) {
  std::vector<std::int64_t> v;
  const Tensor& t = get(name, who);
  if (t.shape.size() != 1)  // shapes, pads and axes are lists, also when a Constant or Concat makes them
    throw InputError(fmt::format("{}: input {} has shape {}; the op takes a 1-D tensor there", who, name, shape_string(t.shape)));
  for (const double d : t.data) {
    if (!(std::fabs(d) <= 0x1p62) || d != std::trunc(d))
      throw InputError(fmt::format("{}: input {} holds {}, not an integer", who, name, d));
    v.push_back(static_cast<std::int64_t>(d));
  }
  return v;
}

template <class T>
double OpRun<T>::scalar(const std::string& name, const std::string& who) {
  const Tensor& t = get(name, who);
  if (t.data.size() != 1) throw InputError(fmt::format("{}: input {} has {} elements, not one", who, name, t.data.size()));
  return t.data[0];
}

template <class T>
void OpRun<T>::put(const ModelNode& n, Tensor t, std::size_t k) {
  t.dtype = dt();
  // accuracy-diff holds several runs and their copies (~67 bytes per element measured: a
  // 100-byte model whose Pad makes 2*10^8 elements peaked at 13.5 GB). Each tensor is
  // under the element limit; the sum of those held at once is checked against the
  // machine here, so a tiny model cannot take all of its memory. Values are counted while
  // they are held (drop() gives them back): a long pipeline of batch-64 activations is
  // not refused for the sum of every value it ever computed.
  held_ += t.data.size();
  check_fits_in_memory(held_, kBytesPerHeldElement, "the model's values");  // callers name the file
  env_[n.outputs.at(k)] = std::move(t);
}

template <class T>
void OpRun<T>::put_as_given(const ModelNode& n, Tensor t) {
  held_ += t.data.size();
  env_[n.outputs.at(0)] = std::move(t);
}

template <class T>
void OpRun<T>::check_room(std::uint64_t more) const {
  check_fits_in_memory(held_ + more, kBytesPerHeldElement, "the model's values");
}

template <class T>
void OpRun<T>::drop(const std::string& name) {
  const auto it = env_.find(name);
  if (it == env_.end()) return;
  held_ -= std::min<std::uint64_t>(held_, it->second.data.size());
  env_.erase(it);
}

template class OpRun<float>;
template class OpRun<double>;

std::string where(const ModelNode& n, std::size_t i) {
  return fmt::format("{} at node {}{}", n.op, i, n.name.empty() ? "" : " (" + n.name + ")");
}

std::int64_t prod(const Shape& s, std::size_t from, std::size_t to) {
  const std::size_t end = std::min(to, s.size());
  return from >= end ? 1
                     : std::accumulate(s.begin() + static_cast<std::ptrdiff_t>(from), s.begin() + static_cast<std::ptrdiff_t>(end),
                                       std::int64_t{1}, std::multiplies<>());
}

std::int64_t checked_add(std::int64_t a, std::int64_t b, const std::string& where) {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) throw InputError(fmt::format("{}: a dimension overflows ({} + {})", where, a, b));
  return r;
}

std::int64_t checked_mul(std::int64_t a, std::int64_t b, const std::string& where) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) throw InputError(fmt::format("{}: a dimension overflows ({} * {})", where, a, b));
  return r;
}

Tensor alloc(const Shape& shape, const std::string& where, double fill) {
  const std::int64_t n = checked_element_count(shape, where + ": output");
  Tensor t;
  t.shape = shape;
  t.data.assign(static_cast<std::size_t>(n), fill);
  return t;
}

std::int64_t positive_dim(std::int64_t d, const std::string& where, const char* axis) {
  if (d < 1)
    throw InputError(fmt::format("{}: the output {} would be {}: the kernel (dilated) is larger than the padded input",
                                 where, axis, d));
  return d;
}

void same_padding(const std::string& auto_pad, std::int64_t in, std::int64_t k, std::int64_t stride, std::int64_t dil,
                  std::int64_t& begin, std::int64_t& end) {
  const std::int64_t out = (in + stride - 1) / stride;
  const std::int64_t total = std::max<std::int64_t>(0, (out - 1) * stride + (k - 1) * dil + 1 - in);
  begin = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
  end = total - begin;
}

}  // namespace foldcheck::ops
