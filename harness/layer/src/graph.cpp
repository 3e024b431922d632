#include "foldcheck/layer/graph.hpp"

#include "foldcheck/base/errors.hpp"

namespace foldcheck {

const char* name(BnForm f) { return f == BnForm::Textbook ? "textbook" : "scale_shift"; }

BnForm bn_form_from_name(const std::string& n) {
  if (n == "textbook") return BnForm::Textbook;
  if (n == "scale_shift") return BnForm::ScaleShift;
  throw InputError("unknown BatchNorm form '" + n + "' (expected textbook or scale_shift)");
}

const Node* Graph::find(Node::Kind k) const {
  for (const auto& n : nodes)
    if (n.kind == k) return &n;
  return nullptr;
}

std::string Graph::describe() const {
  std::string s;
  for (const auto& n : nodes) {
    if (!s.empty()) s += " -> ";
    s += n.kind == Node::Kind::Conv ? (n.fold ? "Conv(folded)" : "Conv")
         : n.kind == Node::Kind::BatchNorm ? "BatchNorm"
                                           : "ChannelAdd";
  }
  return s;
}

}  // namespace foldcheck
