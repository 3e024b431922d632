// Running a model end to end (model_run.hpp).
#include "foldcheck/model/model_run.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include <fmt/format.h>

#include "foldcheck/layer/bn_check.hpp"
#include "foldcheck/base/errors.hpp"
#include "foldcheck/io/limits.hpp"
#include "foldcheck/layer/fold_pass.hpp"
#include "foldcheck/layer/layer_math.hpp"
#include "foldcheck/io/npy.hpp"

namespace foldcheck {
namespace {

std::int64_t prod(const Shape& s, std::size_t from = 0, std::size_t to = SIZE_MAX) {
  const std::size_t end = std::min(to, s.size());
  return from >= end ? 1
                     : std::accumulate(s.begin() + static_cast<std::ptrdiff_t>(from), s.begin() + static_cast<std::ptrdiff_t>(end),
                                       std::int64_t{1}, std::multiplies<>());
}

// Checked shape arithmetic: every output dimension of every op is computed through these,
// so a model cannot make a shape wrap around 2^63. InputError naming `where` on overflow.
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

// The one allocation point of every op's output: the shape is checked (no negative
// dimension, no overflow, within the element limit, limits.hpp) BEFORE anything is
// allocated, and the tensor comes back filled with `fill`.
Tensor alloc(const Shape& shape, const std::string& where, double fill = 0.0) {
  const std::int64_t n = checked_element_count(shape, where + ": output");
  Tensor t;
  t.shape = shape;
  t.data.assign(static_cast<std::size_t>(n), fill);
  return t;
}

// A spatial output dimension that must hold at least one element: InputError naming the
// node when the (dilated) kernel is larger than the padded input.
std::int64_t positive_dim(std::int64_t d, const std::string& where, const char* axis) {
  if (d < 1)
    throw InputError(fmt::format("{}: the output {} would be {}: the kernel (dilated) is larger than the padded input",
                                 where, axis, d));
  return d;
}

// Numpy broadcasting of two shapes.
Shape broadcast_shape(const Shape& a, const Shape& b, const std::string& where) {
  const std::size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (std::size_t i = 0; i < r; ++i) {
    const std::int64_t x = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const std::int64_t y = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (x != y && x != 1 && y != 1)
      throw InputError(fmt::format("{}: shapes {} and {} do not broadcast", where, shape_string(a), shape_string(b)));
    out[i] = x == 1 ? y : x;  // NumPy's rule: 1 stretches to the other, even to 0 (max() made [0] x [1] one element)
  }
  return out;
}

// Index into a tensor of shape s broadcast to `out` for the flat output index i.
struct Broadcaster {
  Shape out;
  std::vector<std::int64_t> stride;  // per out dim (0 where broadcast)
  Broadcaster(const Shape& o, const Shape& s) : out(o), stride(o.size(), 0) {
    std::int64_t st = 1;
    for (std::size_t k = 0; k < s.size(); ++k) {
      const std::size_t d = s.size() - 1 - k, od = o.size() - 1 - k;
      stride[od] = s[d] == 1 ? 0 : st;
      st *= s[d];
    }
  }
  std::int64_t operator()(std::int64_t i) const {
    std::int64_t idx = 0;
    for (std::size_t d = out.size(); d-- > 0;) {
      idx += (i % out[d]) * stride[d];
      i /= out[d];
    }
    return idx;
  }
};

// auto_pad SAME_UPPER / SAME_LOWER: the begin and end padding of one spatial dimension that
// give ceil(in / stride) outputs (the extra padding goes to the end for SAME_UPPER).
void same_padding(const std::string& auto_pad, std::int64_t in, std::int64_t k, std::int64_t stride, std::int64_t dil,
                  std::int64_t& begin, std::int64_t& end) {
  const std::int64_t out = (in + stride - 1) / stride;
  const std::int64_t total = std::max<std::int64_t>(0, (out - 1) * stride + (k - 1) * dil + 1 - in);
  begin = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
  end = total - begin;
}

template <class T>
class Exec {
 public:
  Exec(const Model& m, const BnPatterns& pairs, const ModelRunOptions& o) : m_(m), pairs_(pairs), o_(o) {}

  std::map<std::string, Tensor> run(const std::map<std::string, Tensor>& inputs) {
    for (const auto& [k, v] : inputs) {
      env_[k] = v;
      held_ += v.data.size();
    }
    std::map<std::size_t, const BnPair*> at_layer;
    std::set<std::size_t> skip;
    for (const BnPair& p : pairs_.pairs) {
      at_layer[p.layer] = &p;
      skip.insert(p.bn);
      for (const std::size_t i : p.through) skip.insert(i);
    }
    // Remaining uses of each value, to free activations once consumed.
    std::map<std::string, int> uses;
    for (const ModelNode& n : m_.nodes)
      for (const auto& in : n.inputs) ++uses[in];
    for (std::size_t i = 0; i < m_.nodes.size(); ++i) {
      const ModelNode& n = m_.nodes[i];
      // An Identity of an initializer is an alias of it (Model::aliases): get() finds it
      // there, so it is neither run nor copied (300 of them were 300 copies).
      const bool alias = n.op == "Identity" && n.outputs.size() == 1 && m_.aliases.count(n.outputs[0]);
      if (!skip.count(i) && !alias) {
        if (const auto it = at_layer.find(i); it != at_layer.end()) {
          pair(*it->second);
          if (o_.after_node) {
            const BnPair& p = *it->second;
            o_.after_node(p.bn, {&get(n.inputs.at(0), n.op)}, env_.at(m_.nodes[p.bn].outputs.at(0)));
          }
        } else {
          node(n, i);
          if (o_.after_node && n.op != "Constant") {
            std::vector<const Tensor*> ins;
            for (const auto& in : n.inputs) ins.push_back(in.empty() ? nullptr : &get(in, where(n, i)));
            o_.after_node(i, ins, env_.at(n.outputs.at(0)));
          }
        }
      }
      for (const auto& in : n.inputs)
        if (--uses[in] == 0 && !m_.is_graph_output(in) && !o_.keep.count(in) && !inputs.count(in)) drop(in);
      // Values nothing reads (dangling outputs, e.g. 300 unused Identities) are freed at once.
      for (const auto& out : n.outputs)
        if (!uses.count(out) && !m_.is_graph_output(out) && !o_.keep.count(out)) drop(out);
      if (o_.progress) o_.progress(i + 1, m_.nodes.size());
    }
    std::map<std::string, Tensor> out;
    for (const ValueInfo& v : m_.outputs) out[v.name] = get(v.name, "graph output");
    for (const std::string& k : o_.keep)
      if (env_.count(k)) out[k] = env_[k];
    return out;
  }

 private:
  static constexpr bool kF64 = std::is_same_v<T, double>;
  DType dt() const { return o_.dtype; }
  double r(double x) const { return kF64 ? x : static_cast<double>(static_cast<float>(x)); }

  // Every value an op reads holds exactly the elements its shape says (an integer
  // initializer whose dims and values disagree, a scalar with no value): the ops index by
  // shape, so a shorter vector would be read past its end.
  static const Tensor& consistent(const Tensor& t, const std::string& name, const std::string& who) {
    std::uint64_t n = 1;
    for (const std::int64_t d : t.shape) {
      if (d < 0 || (d > 0 && n > UINT64_MAX / static_cast<std::uint64_t>(d))) n = UINT64_MAX;
      else n *= static_cast<std::uint64_t>(d);
    }
    if (n != t.data.size())
      throw InputError(fmt::format("{}: value {} has shape {} but {} values", who, name, shape_string(t.shape), t.data.size()));
    return t;
  }

  const Tensor& get(const std::string& name, const std::string& who) {
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
  // An integer input (shape, pads, axes): every value must be an integer within +-2^62.
  std::vector<std::int64_t> ints(const std::string& name, const std::string& who) {
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
  // A scalar input (Clip's min and max, Pad's value): exactly one element.
  double scalar(const std::string& name, const std::string& who) {
    const Tensor& t = get(name, who);
    if (t.data.size() != 1) throw InputError(fmt::format("{}: input {} has {} elements, not one", who, name, t.data.size()));
    return t.data[0];
  }
  void put(const ModelNode& n, Tensor t, std::size_t k = 0) {
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
  void drop(const std::string& name) {
    const auto it = env_.find(name);
    if (it == env_.end()) return;
    held_ -= std::min<std::uint64_t>(held_, it->second.data.size());
    env_.erase(it);
  }
  static std::string where(const ModelNode& n, std::size_t i) {
    return fmt::format("{} at node {}{}", n.op, i, n.name.empty() ? "" : " (" + n.name + ")");
  }

  // ---- layer + BatchNorm pairs ----
  void pair(const BnPair& p) {
    const ModelNode& layer = m_.nodes[p.layer];
    const ModelNode& bn = m_.nodes[p.bn];
    const LayerParams lp = layer_params(m_, p);
    const Tensor& x = get(layer.inputs[0], layer.op);
    if (layer.op != "ConvTranspose") {
      Tensor xin = x;
      Graph g = pair_graph(m_, p, lp, xin, dt());
      if (o_.fused) g = fold_batchnorm(g, o_.recipe, o_.ref, o_.policy.arith);
      Tensor y;
      y.shape = layer_output_shape(layer, g.nodes[0].geometry, x.shape);
      y.data = evaluate(g, xin.data, o_.policy);
      put(bn, std::move(y));
      return;
    }
    // ConvTranspose: the layer with folded parameters, or the layer then BN.
    if (o_.fused) {
      const FoldedParams fp = fold_parameters(lp.weight, lp.per_channel, lp.bias, lp.bn, lp.dtype, o_.recipe, o_.ref);
      Tensor w = *m_.initializer(layer.inputs[1]);
      for (std::size_t k = 0; k < lp.index.size(); ++k) w.data[lp.index[k]] = fp.weight[k];
      Tensor y = linear(layer, where(layer, p.layer), x, w, fp.bias);
      if (!fp.post_add.empty()) channelwise(y, [&](double v, std::size_t o) { return r(v + fp.post_add[o]); });
      put(bn, std::move(y));
    } else {
      Tensor y = linear(layer, where(layer, p.layer), x, *m_.initializer(layer.inputs[1]), lp.bias);
      batchnorm(y, lp.bn);
      put(bn, std::move(y));
    }
  }

  template <class F>
  void channelwise(Tensor& y, F f) {
    const std::int64_t C = y.shape.size() > 1 ? y.shape[1] : 1, inner = prod(y.shape, 2);
    for (std::size_t i = 0; i < y.data.size(); ++i)
      y.data[i] = f(y.data[i], static_cast<std::size_t>((static_cast<std::int64_t>(i) / inner) % C));
  }

  void batchnorm(Tensor& y, const ref::BnParams& bn) {
    const DType a = kF64 ? DType::Float64 : DType::Float32;
    channelwise(y, [&](double v, std::size_t o) {
      return static_cast<double>(bn_apply<T>(static_cast<T>(v), bn, o, o_.policy.bn_form, o_.policy.arith, a));
    });
  }

  // Gemm / MatMul / ConvTranspose with explicit parameters (bias per output channel or empty).
  // Gemm computes alpha * (A' B') + beta * C as the spec defines: the product accumulated
  // sequentially over k, times alpha (rounded once, skipped when alpha = 1), plus beta * C
  // (rounded once, skipped when beta = 1). `at` names the node in messages.
  Tensor linear(const ModelNode& n, const std::string& at, const Tensor& x, const Tensor& w, const std::vector<double>& bias) {
    if (n.op == "ConvTranspose") return conv_transpose(n, at, x, w, bias);
    const bool transA = n.op == "Gemm" && n.int_attr("transA", 0) != 0, transB = n.op == "Gemm" && n.int_attr("transB", 0) != 0;
    const T alpha = static_cast<T>(n.op == "Gemm" ? n.float_attr("alpha", 1.0) : 1.0);
    const T beta = static_cast<T>(n.op == "Gemm" ? n.float_attr("beta", 1.0) : 1.0);
    if (w.shape.size() != 2) throw InputError(fmt::format("{}: only 2-D weights are supported, got {}", at, shape_string(w.shape)));
    const std::int64_t K = transB ? w.shape[1] : w.shape[0], N = transB ? w.shape[0] : w.shape[1];
    if (K < 1) throw InputError(fmt::format("{}: the weight {} is empty", at, shape_string(w.shape)));
    std::int64_t M;
    if (n.op == "Gemm") {
      if (x.shape.size() != 2) throw InputError(fmt::format("{}: input must be 2-D, got {}", at, shape_string(x.shape)));
      M = transA ? x.shape[1] : x.shape[0];
      if ((transA ? x.shape[0] : x.shape[1]) != K)
        throw InputError(fmt::format("{}: inner dimensions differ (input {}, weight {})", at, shape_string(x.shape), shape_string(w.shape)));
    } else {
      if (x.shape.empty() || x.shape.back() != K)
        throw InputError(fmt::format("{}: inner dimensions differ (input {}, weight {})", at, shape_string(x.shape), shape_string(w.shape)));
      M = prod(x.shape) / K;
    }
    Shape ys = n.op == "Gemm" ? Shape{M, N} : x.shape;
    if (n.op != "Gemm") ys.back() = N;
    Tensor y = alloc(ys, at);
    for (std::int64_t i = 0; i < M; ++i)
      for (std::int64_t j = 0; j < N; ++j) {
        T acc = 0;
        for (std::int64_t k = 0; k < K; ++k) {
          const T a = static_cast<T>(x.data[static_cast<std::size_t>(transA ? k * M + i : i * K + k)]);
          const T b = static_cast<T>(round_to(dt(), w.data[static_cast<std::size_t>(transB ? j * K + k : k * N + j)]));
          acc = acc + a * b;
        }
        if (alpha != T(1)) acc = alpha * acc;
        if (!bias.empty()) {
          const T c = static_cast<T>(round_to(dt(), bias[static_cast<std::size_t>(j)]));
          acc = acc + (beta != T(1) ? static_cast<T>(beta * c) : c);
        }
        y.data[static_cast<std::size_t>(i * N + j)] = static_cast<double>(acc);
      }
    return y;
  }

  // ConvTranspose over [N, C, H, W] with weight [C, O/group, KH, KW]: every shape and
  // attribute checked (group divides C, the weight fits, output dims >= 1 with checked
  // arithmetic, the element limit) before the output is allocated.
  Tensor conv_transpose(const ModelNode& n, const std::string& at_, const Tensor& x, const Tensor& w, const std::vector<double>& bias) {
    if (x.shape.size() != 4 || w.shape.size() != 4)
      throw InputError(fmt::format("{}: only 2-D convs (4-D input and weight), got {} and {}", at_, shape_string(x.shape), shape_string(w.shape)));
    const std::int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
    const std::int64_t g = n.int_attr("group", 1);
    if (g < 1 || C % g || w.shape[0] != C || w.shape[1] < 1 || w.shape[2] < 1 || w.shape[3] < 1)
      throw InputError(fmt::format("{}: weight {} does not fit input {} with group {}", at_, shape_string(w.shape), shape_string(x.shape), g));
    const std::int64_t opg = w.shape[1], O = checked_mul(opg, g, at_), cpg = C / g, KH = w.shape[2], KW = w.shape[3];
    auto at = [&](const std::vector<std::int64_t>& v, std::size_t i, std::int64_t d) { return v.size() > i ? v[i] : d; };
    const auto s = n.ints_attr("strides"), d = n.ints_attr("dilations"), pads = n.ints_attr("pads"), op = n.ints_attr("output_padding");
    const std::int64_t sh = at(s, 0, 1), sw = at(s, 1, 1), dh = at(d, 0, 1), dw = at(d, 1, 1);
    const std::int64_t pt = at(pads, 0, 0), pl = at(pads, 1, 0), pb = at(pads, 2, 0), pr = at(pads, 3, 0);
    // sh * (H - 1) + output_padding + (KH - 1) * dh + 1 - pads, checked.
    auto out_dim = [&](std::int64_t s_, std::int64_t in, std::int64_t opad, std::int64_t k, std::int64_t d_, std::int64_t b, std::int64_t e) {
      std::int64_t v = checked_mul(s_, in - 1, at_);
      v = checked_add(v, checked_add(opad, checked_add(checked_mul(k - 1, d_, at_), 1, at_), at_), at_);
      return checked_add(v, -checked_add(b, e, at_), at_);
    };
    const std::int64_t OH = positive_dim(out_dim(sh, H, at(op, 0, 0), KH, dh, pt, pb), at_, "height");
    const std::int64_t OW = positive_dim(out_dim(sw, W, at(op, 1, 0), KW, dw, pl, pr), at_, "width");
    Tensor y = alloc({N, O, OH, OW}, at_);
    for (std::int64_t nn = 0; nn < N; ++nn)
      for (std::int64_t o = 0; o < O; ++o) {
        const std::int64_t gi = o / opg, j = o % opg;
        for (std::int64_t oh = 0; oh < OH; ++oh)
          for (std::int64_t ow = 0; ow < OW; ++ow) {
            T acc = 0;
            for (std::int64_t c = 0; c < cpg; ++c)
              for (std::int64_t kh = 0; kh < KH; ++kh) {
                const std::int64_t th = oh + pt - kh * dh;
                if (th < 0 || th % sh) continue;
                const std::int64_t ih = th / sh;
                if (ih >= H) continue;
                for (std::int64_t kw = 0; kw < KW; ++kw) {
                  const std::int64_t tw = ow + pl - kw * dw;
                  if (tw < 0 || tw % sw) continue;
                  const std::int64_t iw = tw / sw;
                  if (iw >= W) continue;
                  const std::int64_t ci = gi * cpg + c;
                  acc = acc + static_cast<T>(x.data[static_cast<std::size_t>(((nn * C + ci) * H + ih) * W + iw)]) *
                                  static_cast<T>(round_to(dt(), w.data[static_cast<std::size_t>(((ci * opg + j) * KH + kh) * KW + kw)]));
                }
              }
            if (!bias.empty()) acc = acc + static_cast<T>(round_to(dt(), bias[static_cast<std::size_t>(o)]));
            y.data[static_cast<std::size_t>(((nn * O + o) * OH + oh) * OW + ow)] = static_cast<double>(acc);
          }
      }
    return y;
  }

  // ---- single nodes ----
  template <class F>
  void unary(const ModelNode& n, F f) {
    Tensor y = get(n.inputs.at(0), n.op);
    for (double& v : y.data) v = f(v);
    put(n, std::move(y));
  }
  template <class F>
  void binary(const ModelNode& n, std::size_t i, F f) {
    const Tensor a = get(n.inputs.at(0), where(n, i)), b = get(n.inputs.at(1), where(n, i));
    Tensor y = alloc(broadcast_shape(a.shape, b.shape, where(n, i)), where(n, i));
    const Broadcaster ba(y.shape, a.shape), bb(y.shape, b.shape);
    for (std::int64_t k = 0; k < static_cast<std::int64_t>(y.data.size()); ++k)
      y.data[static_cast<std::size_t>(k)] =
          f(static_cast<T>(round_to(dt(), a.data[static_cast<std::size_t>(ba(k))])), static_cast<T>(round_to(dt(), b.data[static_cast<std::size_t>(bb(k))])));
    put(n, std::move(y));
  }

  void pool(const ModelNode& n, std::size_t idx, bool max) {
    const Tensor& x = get(n.inputs.at(0), where(n, idx));
    if (x.shape.size() != 4) throw InputError(where(n, idx) + ": only 2-D pooling (4-D tensors)");
    const auto ks = n.ints_attr("kernel_shape"), s = n.ints_attr("strides"), pads = n.ints_attr("pads"), d = n.ints_attr("dilations");
    auto at = [](const std::vector<std::int64_t>& v, std::size_t i, std::int64_t def) { return v.size() > i ? v[i] : def; };
    const std::int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
    const std::int64_t KH = at(ks, 0, 1), KW = at(ks, 1, 1), sh = at(s, 0, 1), sw = at(s, 1, 1), dh = at(d, 0, 1), dw = at(d, 1, 1);
    std::int64_t pt = at(pads, 0, 0), pl = at(pads, 1, 0), pb = at(pads, 2, 0), pr = at(pads, 3, 0);
    const std::string ap = n.string_attr("auto_pad", "NOTSET");
    if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      same_padding(ap, H, KH, sh, dh, pt, pb);
      same_padding(ap, W, KW, sw, dw, pl, pr);
    }
    const bool ceil_mode = n.int_attr("ceil_mode", 0) != 0, include_pad = n.int_attr("count_include_pad", 0) != 0;
    const std::string at_ = where(n, idx);
    // (in + pads - dilated kernel) / stride + 1, rounded up with ceil_mode; checked, >= 1.
    auto out_dim = [&](std::int64_t in, std::int64_t k, std::int64_t st, std::int64_t di, std::int64_t b, std::int64_t e, const char* axis) {
      const std::int64_t span = checked_add(checked_add(in, checked_add(b, e, at_), at_),
                                            -checked_add(checked_mul(k - 1, di, at_), 1, at_), at_);
      if (span < 0) return positive_dim(0, at_, axis);
      return positive_dim((ceil_mode ? checked_add(span, st - 1, at_) / st : span / st) + 1, at_, axis);
    };
    const std::int64_t OH = out_dim(H, KH, sh, dh, pt, pb, "height"), OW = out_dim(W, KW, sw, dw, pl, pr, "width");
    Tensor y = alloc({N, C, OH, OW}, at_);
    for (std::int64_t nc = 0; nc < N * C; ++nc)
      for (std::int64_t oh = 0; oh < OH; ++oh)
        for (std::int64_t ow = 0; ow < OW; ++ow) {
          T acc = max ? -std::numeric_limits<T>::infinity() : T(0);
          std::int64_t count = 0;
          for (std::int64_t kh = 0; kh < KH; ++kh)
            for (std::int64_t kw = 0; kw < KW; ++kw) {
              const std::int64_t ih = oh * sh - pt + kh * dh, iw = ow * sw - pl + kw * dw;
              const bool inside = ih >= 0 && ih < H && iw >= 0 && iw < W;
              if (!inside) {
                if (!max && include_pad && ih < H + pb && iw < W + pr) ++count;
                continue;
              }
              const T v = static_cast<T>(x.data[static_cast<std::size_t>((nc * H + ih) * W + iw)]);
              if (max) acc = std::max(acc, v);
              else acc = acc + v;
              ++count;
            }
          if (!max) acc = count ? acc / static_cast<T>(count) : T(0);
          y.data[static_cast<std::size_t>((nc * OH + oh) * OW + ow)] = static_cast<double>(acc);
        }
    put(n, std::move(y));
  }

  // Reshape's output shape from the `target` input, as the ONNX spec defines it: 0 copies
  // the input's dimension (allowzero = 0; it must exist) or is 0 (allowzero = 1, then no
  // -1 with it); at most one -1, inferred; every other value >= 0; the element count kept.
  // Products in checked arithmetic, so a target wrapping around 2^64 is refused by name.
  static Shape reshape_target(const ModelNode& n, const std::string& at, const Shape& in, std::vector<std::int64_t> s) {
    const bool allowzero = n.int_attr("allowzero", 0) != 0;
    const std::int64_t have = prod(in);
    std::int64_t known = 1, infer = -1;
    for (std::size_t k = 0; k < s.size(); ++k) {
      if (s[k] == 0 && !allowzero) {
        if (k >= in.size())
          throw InputError(fmt::format("{}: target {} copies dimension {} (0), which the input {} does not have", at,
                                       shape_string(s), k, shape_string(in)));
        s[k] = in[k];
      }
      if (s[k] == -1) {
        if (infer >= 0 || (allowzero && std::count(s.begin(), s.end(), 0)))
          throw InputError(fmt::format("{}: target {} has more than one -1, or a -1 with a 0 under allowzero", at, shape_string(s)));
        infer = static_cast<std::int64_t>(k);
      } else if (s[k] < 0) {
        throw InputError(fmt::format("{}: target {} has a negative dimension {}", at, shape_string(s), s[k]));
      } else {
        known = checked_mul(known, s[k], at);
      }
    }
    if (infer >= 0) {
      if (known == 0 || have % known)
        throw InputError(fmt::format("{}: cannot reshape {} to {}", at, shape_string(in), shape_string(s)));
      s[static_cast<std::size_t>(infer)] = have / known;
    } else if (known != have) {
      throw InputError(fmt::format("{}: cannot reshape {} to {}", at, shape_string(in), shape_string(s)));
    }
    return s;
  }

  void node(const ModelNode& n, std::size_t i) {
    const std::string& op = n.op;
    if (!n.domain.empty() && n.domain != "ai.onnx") throw InputError(fmt::format("unsupported op {}::{} at node {}", n.domain, op, i));
    if (op == "Identity") put(n, get(n.inputs.at(0), where(n, i)));
    else if (op == "Relu") unary(n, [](double v) { return v > 0 ? v : 0.0; });
    else if (op == "LeakyRelu") {
      const T a = static_cast<T>(n.float_attr("alpha", 0.01));
      unary(n, [&](double v) { return v >= 0 ? v : static_cast<double>(a * static_cast<T>(v)); });
    } else if (op == "Sigmoid") unary(n, [&](double v) { return r(1.0 / (1.0 + std::exp(-v))); });
    else if (op == "HardSigmoid" || op == "HardSwish") {
      const T a = static_cast<T>(op == "HardSwish" ? 1.0 / 6 : n.float_attr("alpha", 0.2));
      const T b = static_cast<T>(op == "HardSwish" ? 0.5 : n.float_attr("beta", 0.5));
      const bool swish = op == "HardSwish";
      unary(n, [&](double v) {
        const T h = std::max(T(0), std::min(T(1), static_cast<T>(a * static_cast<T>(v)) + b));
        return static_cast<double>(swish ? static_cast<T>(v) * h : h);
      });
    } else if (op == "Clip") {
      double lo = -HUGE_VAL, hi = HUGE_VAL;
      if (m_.opset < 11) {
        lo = n.float_attr("min", lo);
        hi = n.float_attr("max", hi);
      } else {
        if (n.inputs.size() > 1 && !n.inputs[1].empty()) lo = scalar(n.inputs[1], where(n, i));
        if (n.inputs.size() > 2 && !n.inputs[2].empty()) hi = scalar(n.inputs[2], where(n, i));
      }
      unary(n, [&](double v) { return std::min(std::max(v, lo), hi); });
    } else if (op == "Add") binary(n, i, [](T a, T b) { return static_cast<double>(static_cast<T>(a + b)); });
    else if (op == "Sub") binary(n, i, [](T a, T b) { return static_cast<double>(static_cast<T>(a - b)); });
    else if (op == "Mul") binary(n, i, [](T a, T b) { return static_cast<double>(static_cast<T>(a * b)); });
    else if (op == "Div") binary(n, i, [](T a, T b) { return static_cast<double>(static_cast<T>(a / b)); });
    else if (op == "Conv") {
      Tensor x = get(n.inputs.at(0), where(n, i));
      const Shape xs = x.shape;
      Graph g;
      g.dtype = dt();
      g.nodes = {layer_as_conv(m_, i, layer_params_of_node(m_, i), x, dt())};
      Tensor y;
      y.shape = layer_output_shape(n, g.nodes[0].geometry, xs);
      y.data = evaluate(g, x.data, o_.policy);
      put(n, std::move(y));
    } else if (op == "ConvTranspose" || op == "Gemm" || op == "MatMul") {
      const Tensor& x = get(n.inputs.at(0), where(n, i));
      const Tensor& w = get(n.inputs.at(1), where(n, i));
      std::vector<double> bias;
      if (w.shape.size() != (op == "ConvTranspose" ? 4u : 2u))
        throw InputError(fmt::format("{}: weight {} has rank {}; the op needs {}", where(n, i), shape_string(w.shape),
                                     w.shape.size(), op == "ConvTranspose" ? 4 : 2));
      if (op != "MatMul" && n.inputs.size() > 2 && !n.inputs[2].empty()) {
        bias = get(n.inputs[2], where(n, i)).data;
        const std::int64_t N = op == "Gemm" ? (n.int_attr("transB", 0) ? w.shape[0] : w.shape[1]) : w.shape[1] * n.int_attr("group", 1);
        if (static_cast<std::int64_t>(bias.size()) != N) throw InputError(where(n, i) + ": only a per-output-channel bias is supported");
      }
      put(n, linear(n, where(n, i), x, w, bias));
    } else if (op == "BatchNormalization") {
      if (n.int_attr("training_mode", 0)) throw InputError(where(n, i) + ": training_mode = 1 is not an inference BatchNorm");
      Tensor y = get(n.inputs.at(0), where(n, i));
      ref::BnParams bn{get(n.inputs.at(1), where(n, i)).data, get(n.inputs.at(2), where(n, i)).data,
                       get(n.inputs.at(3), where(n, i)).data, get(n.inputs.at(4), where(n, i)).data,
                       static_cast<double>(static_cast<float>(n.float_attr("epsilon", 1e-5)))};
      check_bn_params(bn, bn.gamma.size(), where(n, i));
      if (y.shape.size() < 2 || y.shape[1] != static_cast<std::int64_t>(bn.gamma.size()))
        throw InputError(fmt::format("{}: input {} does not have {} channels (dimension 1), as the parameters do", where(n, i),
                                     shape_string(y.shape), bn.gamma.size()));
      batchnorm(y, bn);
      put(n, std::move(y));
    } else if (op == "MaxPool") pool(n, i, true);
    else if (op == "AveragePool") pool(n, i, false);
    else if (op == "GlobalAveragePool") {
      const Tensor& x = get(n.inputs.at(0), where(n, i));
      const std::int64_t NC = prod(x.shape, 0, 2), HW = prod(x.shape, 2);
      Tensor y;
      y.shape = x.shape;
      for (std::size_t k = 2; k < y.shape.size(); ++k) y.shape[k] = 1;
      y.data.resize(static_cast<std::size_t>(NC));
      for (std::int64_t c = 0; c < NC; ++c) {
        T acc = 0;
        for (std::int64_t k = 0; k < HW; ++k) acc = acc + static_cast<T>(x.data[static_cast<std::size_t>(c * HW + k)]);
        y.data[static_cast<std::size_t>(c)] = static_cast<double>(static_cast<T>(acc / static_cast<T>(HW)));
      }
      put(n, std::move(y));
    } else if (op == "Flatten") {
      Tensor y = get(n.inputs.at(0), where(n, i));
      std::int64_t axis = n.int_attr("axis", 1);
      if (axis < 0) axis += static_cast<std::int64_t>(y.shape.size());
      if (axis < 0 || axis > static_cast<std::int64_t>(y.shape.size()))
        throw InputError(fmt::format("{}: axis {} is out of range for rank {}", where(n, i), n.int_attr("axis", 1), y.shape.size()));
      y.shape = {prod(y.shape, 0, static_cast<std::size_t>(axis)), prod(y.shape, static_cast<std::size_t>(axis))};
      put(n, std::move(y));
    } else if (op == "Reshape") {
      Tensor y = get(n.inputs.at(0), where(n, i));
      y.shape = reshape_target(n, where(n, i), y.shape, ints(n.inputs.at(1), where(n, i)));
      put(n, std::move(y));
    } else if (op == "Squeeze" || op == "Unsqueeze") {
      Tensor y = get(n.inputs.at(0), where(n, i));
      std::vector<std::int64_t> axes = n.ints_attr("axes");
      if (axes.empty() && n.inputs.size() > 1) axes = ints(n.inputs[1], where(n, i));
      const std::int64_t rank = static_cast<std::int64_t>(y.shape.size()) + (op == "Unsqueeze" ? static_cast<std::int64_t>(axes.size()) : 0);
      for (auto& a : axes) {
        const std::int64_t given = a;
        a = a < 0 ? a + rank : a;
        if (a < 0 || a >= rank) throw InputError(fmt::format("{}: axis {} is out of range for rank {}", where(n, i), given, rank));
      }
      std::sort(axes.begin(), axes.end());
      if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) throw InputError(where(n, i) + ": repeated axes");
      if (op == "Squeeze") {
        Shape s;
        for (std::size_t k = 0; k < y.shape.size(); ++k) {
          const bool drop = axes.empty() ? y.shape[k] == 1 : std::binary_search(axes.begin(), axes.end(), static_cast<std::int64_t>(k));
          if (drop && y.shape[k] != 1)
            throw InputError(fmt::format("{}: axis {} of {} has size {}, not 1: it cannot be squeezed", where(n, i), k,
                                         shape_string(y.shape), y.shape[k]));
          if (!drop) s.push_back(y.shape[k]);
        }
        y.shape = s;
      } else {
        for (const auto a : axes) y.shape.insert(y.shape.begin() + a, 1);
      }
      put(n, std::move(y));
    } else if (op == "Concat") {
      std::vector<const Tensor*> parts;
      for (const auto& in : n.inputs) parts.push_back(&get(in, where(n, i)));
      std::int64_t axis = n.int_attr("axis", 0);
      const std::int64_t rank = static_cast<std::int64_t>(parts.at(0)->shape.size());
      if (axis < 0) axis += rank;
      if (axis < 0 || axis >= rank)
        throw InputError(fmt::format("{}: axis {} is out of range for rank {}", where(n, i), n.int_attr("axis", 0), rank));
      for (const Tensor* p : parts)
        for (std::int64_t d = 0; d < rank; ++d)
          if (static_cast<std::int64_t>(p->shape.size()) != rank || (d != axis && p->shape[static_cast<std::size_t>(d)] != parts[0]->shape[static_cast<std::size_t>(d)]))
            throw InputError(fmt::format("{}: input shapes {} and {} do not concatenate on axis {}", where(n, i),
                                         shape_string(parts[0]->shape), shape_string(p->shape), axis));
      Shape ys = parts[0]->shape;
      ys[static_cast<std::size_t>(axis)] = 0;
      for (const Tensor* p : parts) ys[static_cast<std::size_t>(axis)] = checked_add(ys[static_cast<std::size_t>(axis)], p->shape[static_cast<std::size_t>(axis)], where(n, i));
      // Checked before the copy: a chain of self-Concats doubles at every node.
      check_fits_in_memory(held_ + static_cast<std::uint64_t>(checked_element_count(ys, where(n, i) + ": output")),
                           kBytesPerHeldElement, "the model's values");
      Tensor y;
      y.shape = ys;
      y.data.reserve(static_cast<std::size_t>(prod(ys)));
      const std::int64_t outer = prod(y.shape, 0, static_cast<std::size_t>(axis));
      for (std::int64_t o = 0; o < outer; ++o)
        for (const Tensor* p : parts) {
          const std::int64_t chunk = prod(p->shape, static_cast<std::size_t>(axis));
          y.data.insert(y.data.end(), p->data.begin() + o * chunk, p->data.begin() + (o + 1) * chunk);
        }
      put(n, std::move(y));
    } else if (op == "Pad") {
      const Tensor& x = get(n.inputs.at(0), where(n, i));
      if (n.string_attr("mode", "constant") != "constant") throw InputError(where(n, i) + ": only constant padding");
      std::vector<std::int64_t> pads = n.ints_attr("pads");
      double value = n.float_attr("value", 0.0);
      if (m_.opset >= 11) {
        pads = ints(n.inputs.at(1), where(n, i));
        if (n.inputs.size() > 2 && !n.inputs[2].empty()) value = scalar(n.inputs[2], where(n, i));
      }
      const std::size_t rank = x.shape.size();
      if (pads.size() != 2 * rank)
        throw InputError(fmt::format("{}: {} pads for a tensor of rank {} (needs {})", where(n, i), pads.size(), rank, 2 * rank));
      Shape ys = x.shape;
      for (std::size_t k = 0; k < rank; ++k) {
        ys[k] = checked_add(ys[k], checked_add(pads[k], pads[k + rank], where(n, i)), where(n, i));
        if (ys[k] < 0)
          throw InputError(fmt::format("{}: pads {} and {} crop axis {} of {} by more than it holds", where(n, i), pads[k],
                                       pads[k + rank], k, shape_string(x.shape)));
      }
      Tensor y = alloc(ys, where(n, i), r(value));
      for (std::int64_t k = 0; k < x.size(); ++k) {
        std::int64_t rem = k, idx = 0, mul = 1;
        std::vector<std::int64_t> coord(rank);
        for (std::size_t d = rank; d-- > 0;) {
          coord[d] = rem % x.shape[d];
          rem /= x.shape[d];
        }
        for (std::size_t d = rank; d-- > 0;) {
          const std::int64_t c = coord[d] + pads[d];
          if (c < 0 || c >= y.shape[d]) { idx = -1; break; }
          idx += c * mul;
          mul *= y.shape[d];
        }
        if (idx >= 0) y.data[static_cast<std::size_t>(idx)] = x.data[static_cast<std::size_t>(k)];
      }
      put(n, std::move(y));
    } else if (op == "Constant") {
      Tensor y;
      if (const Attribute* a = n.attr("value"); a && a->kind == Attribute::Kind::Tensor) y = a->t;
      else if (const Attribute* f = n.attr("value_float")) y = Tensor{{}, {f->f}, DType::Float32};
      else if (const Attribute* fs = n.attr("value_floats")) y = Tensor{{static_cast<std::int64_t>(fs->floats.size())}, fs->floats, DType::Float32};
      else if (const Attribute* iv = n.attr("value_int")) y = Tensor{{}, {static_cast<double>(iv->i)}, DType::Float64};
      else if (const Attribute* is = n.attr("value_ints")) {
        y.shape = {static_cast<std::int64_t>(is->ints.size())};
        for (const auto v : is->ints) y.data.push_back(static_cast<double>(v));
      } else throw InputError(where(n, i) + ": unsupported Constant attribute");
      held_ += y.data.size();
      env_[n.outputs.at(0)] = std::move(y);
    } else {
      throw InputError(fmt::format("unsupported op {} at node {}{}", op, i, n.name.empty() ? "" : " (" + n.name + ")"));
    }
  }

  const Model& m_;
  const BnPatterns& pairs_;
  const ModelRunOptions& o_;
  std::map<std::string, Tensor> env_;
  static constexpr std::uint64_t kBytesPerHeldElement = 72;  // 67 measured, with headroom
  std::uint64_t held_ = 0;  // elements of the values held now (env_), for check_fits_in_memory
};

}  // namespace

ref::ConvGeometry conv_geometry(const ModelNode& n, const Shape& xs, const Shape& ws) {
  if (xs.size() != 4 || ws.size() != 4)
    throw InputError(fmt::format("Conv {}: only 2-D convs (4-D tensors) are supported, input {}", n.name, shape_string(xs)));
  auto at = [](const std::vector<std::int64_t>& v, std::size_t i, std::int64_t d) { return v.size() > i ? v[i] : d; };
  ref::ConvGeometry g;
  g.N = xs[0];
  g.C = xs[1];
  g.H = xs[2];
  g.W = xs[3];
  g.O = ws[0];
  g.KH = ws[2];
  g.KW = ws[3];
  g.groups = n.int_attr("group", 1);
  const auto s = n.ints_attr("strides"), d = n.ints_attr("dilations"), p = n.ints_attr("pads");
  g.stride_h = at(s, 0, 1);
  g.stride_w = at(s, 1, 1);
  g.dil_h = at(d, 0, 1);
  g.dil_w = at(d, 1, 1);
  g.pad_top = at(p, 0, 0);
  g.pad_left = at(p, 1, 0);
  g.pad_bottom = at(p, 2, 0);
  g.pad_right = at(p, 3, 0);
  const std::string ap = n.string_attr("auto_pad", "NOTSET");
  if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    same_padding(ap, g.H, g.KH, g.stride_h, g.dil_h, g.pad_top, g.pad_bottom);
    same_padding(ap, g.W, g.KW, g.stride_w, g.dil_w, g.pad_left, g.pad_right);
  } else if (ap == "VALID") {
    g.pad_top = g.pad_left = g.pad_bottom = g.pad_right = 0;
  }
  const std::string who = "Conv " + n.name;
  if (g.groups <= 0 || g.C % g.groups || checked_mul(ws[1], g.groups, who) != g.C || g.O < 1 || g.KH < 1 || g.KW < 1)
    throw InputError(fmt::format("Conv {}: weight {} does not fit input {} with group {}", n.name, shape_string(ws),
                                 shape_string(xs), g.groups));
  // The output: (in + pads - dilated kernel) / stride + 1 >= 1, in checked arithmetic.
  auto out = [&](std::int64_t in, std::int64_t b, std::int64_t e, std::int64_t k, std::int64_t d, std::int64_t st, const char* axis) {
    const std::int64_t span = checked_add(checked_add(in, checked_add(b, e, who), who), -checked_add(checked_mul(k - 1, d, who), 1, who), who);
    return positive_dim(span < 0 ? 0 : span / st + 1, who, axis);
  };
  (void)checked_element_count({g.N, g.O, out(g.H, g.pad_top, g.pad_bottom, g.KH, g.dil_h, g.stride_h, "height"),
                               out(g.W, g.pad_left, g.pad_right, g.KW, g.dil_w, g.stride_w, "width")},
                              who + ": output");
  return g;
}

Node layer_as_conv(const Model& m, std::size_t layer, const LayerParams& lp, Tensor& x, DType dt) {
  const ModelNode& node = m.nodes[layer];
  Node c;
  c.kind = Node::Kind::Conv;
  c.name = node.name;
  c.bias = lp.bias;
  for (double& v : c.bias) v = round_to(dt, v);  // parameters in the run's dtype
  if (node.op == "Conv") {
    c.geometry = conv_geometry(node, x.shape, lp.weight_shape);
    c.weight = Tensor{lp.weight_shape, lp.weight, dt};
  } else if (node.op == "Gemm" || node.op == "MatMul") {
    const std::int64_t K = lp.per_channel;
    if (x.shape.empty() || x.size() % K)
      throw InputError(fmt::format("{} {}: input {} does not match K = {}", node.op, node.name, shape_string(x.shape), K));
    const std::int64_t M = x.size() / K;
    if (node.op == "Gemm" && node.int_attr("transA", 0) != 0) {  // x is K x M: rows are its columns
      std::vector<double> t(x.data.size());
      for (std::int64_t i = 0; i < M; ++i)
        for (std::int64_t k = 0; k < K; ++k) t[static_cast<std::size_t>(i * K + k)] = x.data[static_cast<std::size_t>(k * M + i)];
      x.data = std::move(t);
    }
    x.shape = {M, K, 1, 1};
    c.geometry.N = M;
    c.geometry.C = K;
    c.geometry.O = lp.channels;
    c.weight = Tensor{{lp.channels, K, 1, 1}, lp.weight, dt};
  } else {
    throw InputError(fmt::format("{} {}: not a Conv, Gemm or MatMul", node.op, node.name));
  }
  for (double& v : c.weight.data) v = round_to(dt, v);
  return c;
}

Graph pair_graph(const Model& m, const BnPair& p, const LayerParams& lp, Tensor& x, DType dt) {
  // BatchNormalization normalizes axis 1. A MatMul's output features are its last axis:
  // the same axis only for a 2-D input (then [rows, features]); from rank 3 the BatchNorm
  // scales MatMul rows, which no fold into the weights can do.
  if (m.nodes[p.layer].op == "MatMul" && x.shape.size() != 2)
    throw InputError(fmt::format("MatMul {} -> BatchNormalization: input of shape {} gives an output of rank {}, whose axis 1 "
                                 "(which BatchNormalization normalizes) is not the MatMul's output features (its last "
                                 "axis): not a foldable pair",
                                 p.name, shape_string(x.shape), x.shape.size()));
  Graph g;
  g.dtype = dt;
  Node b;
  b.kind = Node::Kind::BatchNorm;
  b.bn = lp.bn;
  g.nodes = {layer_as_conv(m, p.layer, lp, x, dt), b};
  g.nodes[1].geometry = g.nodes[0].geometry;
  return g;
}

Shape layer_output_shape(const ModelNode& layer, const ref::ConvGeometry& g, const Shape& input_shape) {
  if (layer.op == "Conv") return {g.N, g.O, g.OH(), g.OW()};
  if (layer.op == "Gemm") return {g.N, g.O};
  Shape s = input_shape;  // MatMul: [..., K] -> [..., O]
  s.back() = g.O;
  return s;
}

Tensor model_input(const Model& m, const std::optional<std::string>& input, std::uint64_t seed, DType dt) {
  if (m.inputs.size() != 1)
    throw InputError(fmt::format("{}: {} graph inputs; model runs take models with one input", m.path, m.inputs.size()));
  const ValueInfo& vi = m.inputs[0];
  Tensor x;
  if (input) {
    x = read_npy(*input);
    if (x.data.empty()) throw InputError(fmt::format("{}: empty tensor (shape {})", *input, shape_string(x.shape)));
    if (const std::string bad = first_nonfinite(x.data); !bad.empty()) throw InputError(*input + ": input has " + bad);
    // The runs compute in dt: an input that is not a dt value would be rounded first,
    // and the comparison would not be of the values the other engine saw.
    for (std::size_t k = 0; k < x.data.size(); ++k)
      if (round_to(dt, x.data[k]) != x.data[k])
        throw InputError(fmt::format("{}: {} value {:.17g} at index {} is not a {} value (foldcheck's runs "
                                     "compute in {}{}: save the input as {})",
                                     *input, name(x.dtype), x.data[k], k, name(dt), name(dt),
                                     dt == DType::Float32 ? ", whatever the model's types" : "", name(dt)));
  } else {
    x.shape = vi.shape;
    for (std::size_t k = 0; k < x.shape.size(); ++k)
      if (x.shape[k] < 0) {
        if (k != 0) throw InputError(fmt::format("input {} has an unknown dimension {}: give `input`", vi.name, k));
        x.shape[k] = 1;
      }
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> nd;
    x.data.resize(static_cast<std::size_t>(checked_element_count(x.shape, "input " + vi.name)));
    for (double& v : x.data) v = round_to(dt, nd(rng));
  }
  x.dtype = dt;
  if (x.shape.size() != vi.shape.size())
    throw InputError(fmt::format("{}: shape {}, the model's input {} is {}", input ? *input : std::string("input"), shape_string(x.shape), vi.name, shape_string(vi.shape)));
  for (std::size_t k = 0; k < x.shape.size(); ++k)
    if (vi.shape[k] >= 0 && vi.shape[k] != x.shape[k])
      throw InputError(fmt::format("{}: shape {}, the model's input {} is {}", input ? *input : std::string("input"), shape_string(x.shape), vi.name, shape_string(vi.shape)));
  return x;
}

Tensor magnitude(const Model& m, std::size_t node, const std::map<std::string, Tensor>& inputs) {
  // The node alone in a model of its own, every floating value replaced by its absolute
  // value, run in float64 by the same op code as every run.
  const ModelNode& n = m.nodes.at(node);
  Model sub;
  sub.path = m.path;
  sub.opset = m.opset;
  sub.nodes = {n};
  std::map<std::string, Tensor> abs_inputs;
  for (const std::string& in : n.inputs) {
    if (in.empty()) continue;
    if (const Tensor* t = m.initializer(in)) {
      Tensor a = *t;
      for (double& v : a.data) v = std::fabs(v);
      sub.initializers[in] = std::move(a);
    } else if (Shape shape; const auto* ints = m.int_initializer(in, &shape)) {
      sub.int_inits[in] = *ints;
      sub.int_init_shapes[in] = shape;
    } else {
      Tensor a = inputs.at(in);
      for (double& v : a.data) v = std::fabs(v);
      abs_inputs[in] = std::move(a);
      sub.inputs.push_back(ValueInfo{in, abs_inputs[in].shape, std::nullopt, ""});
    }
  }
  sub.outputs.push_back(ValueInfo{n.outputs.at(0), {}, std::nullopt, ""});
  ModelRunOptions o;
  o.dtype = DType::Float64;
  return run_model(sub, BnPatterns{}, abs_inputs, o).at(n.outputs.at(0));
}

std::map<std::string, Tensor> run_model(const Model& m, const BnPatterns& pairs, const std::map<std::string, Tensor>& inputs,
                                        const ModelRunOptions& opts) {
  check_supported(m);  // and check_graph: valid single-assignment graph in topological order
  if (opts.dtype == DType::Float64) return Exec<double>(m, pairs, opts).run(inputs);
  if (opts.dtype != DType::Float32) throw InputError("model runs are float32 or float64");
  return Exec<float>(m, pairs, opts).run(inputs);
}

}  // namespace foldcheck
