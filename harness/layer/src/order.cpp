#include "foldcheck/layer/order.hpp"

#include "foldcheck/base/errors.hpp"

namespace foldcheck {

const char* name(Accumulation a) {
  switch (a) {
    case Accumulation::Sequential: return "sequential";
    case Accumulation::Pairwise: return "pairwise";
    case Accumulation::Blocked: return "blocked";
    case Accumulation::Winograd: return "winograd";
  }
  return "?";
}

std::string Order::label() const {
  return (kind == Accumulation::Blocked ? "blocked:" + std::to_string(block) : std::string(name(kind))) +
         (bias_first ? ", bias first" : "");
}

Order order_from_name(const std::string& n) {
  for (Accumulation a : {Accumulation::Sequential, Accumulation::Pairwise, Accumulation::Winograd})
    if (n == name(a)) return Order(a);
  if (n == "blocked") return Order(Accumulation::Blocked);
  if (n.rfind("blocked:", 0) == 0) {
    const std::string k = n.substr(8);
    if (!k.empty() && k.size() < 10 && k.find_first_not_of("0123456789") == std::string::npos && std::stol(k) > 0)
      return Order(Accumulation::Blocked, std::stol(k));
  }
  throw InputError("unknown accumulation order '" + n +
                   "' (expected sequential, pairwise, blocked, blocked:K with K > 0, or winograd)");
}

bool winograd_applies(const ref::ConvGeometry& g) {
  return g.KH == 3 && g.KW == 3 && g.stride_h == 1 && g.stride_w == 1 && g.dil_h == 1 && g.dil_w == 1;
}

void check_order(const Order& o, const ref::ConvGeometry& g) {
  if (o.kind == Accumulation::Winograd && !winograd_applies(g))
    throw InputError("winograd F(2x2,3x3) needs a 3x3 kernel, stride 1 and dilation 1");
  if (o.kind == Accumulation::Blocked && o.block < 1) throw InputError("blocked accumulation needs a K-block >= 1");
}

}  // namespace foldcheck
