// The op registry (op_registry.hpp): the families' parts in one table.
#include "op_registry.hpp"

#include <stdexcept>

namespace foldcheck::ops {
namespace {

const OpTable& table() {
  static const OpTable ops = [] {
    OpTable all;
    for (OpTable part : {conv_ops(), batchnorm_ops(), elementwise_ops(), pool_ops(), shape_ops()})
      for (auto& [op, entry] : part)
        if (!all.emplace(op, std::move(entry)).second) throw std::logic_error("op " + op + " is registered twice");
    return all;
  }();
  return ops;
}

}  // namespace

const OpEntry* find_op(const std::string& op) {
  const auto it = table().find(op);
  return it == table().end() ? nullptr : &it->second;
}

}  // namespace foldcheck::ops
