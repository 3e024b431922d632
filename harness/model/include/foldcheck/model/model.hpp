#pragma once
// The model IR: an ONNX graph as foldcheck holds it. Nodes in the file's (topological)
// order, each with its op type, name, input and output value names and attributes; the
// initializers as exact tensors; the graph inputs (those that are not initializers) and
// outputs with their shapes. A conv+BN layer (graph.hpp) is cut out of a Model by the
// pattern finder (model_patterns.hpp).
//
// Contract: floating initializers hold their values exactly (float32, float16, bfloat16
// and float64 all widen exactly into double; Tensor::dtype records the stored type);
// integer initializers (shapes, axes, pads) are held in `ints`. The output of an Identity
// node whose input is an initializer is an initializer too (exporters deduplicate equal
// tensors that way; the node stays in the graph; it aliases the tensor, see `aliases`).
// Loading refuses a graph that is not valid SSA in topological order (check_graph). Unknown dimensions of a graph input's
// shape are -1.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "foldcheck/numerics/tensor.hpp"

namespace foldcheck {

struct Attribute {
  enum class Kind { Int, Float, String, Ints, Floats, Tensor, Other };
  Kind kind = Kind::Other;
  std::int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<std::int64_t> ints;
  std::vector<double> floats;
  Tensor t;  // Kind::Tensor (a Constant's value)
  // Kind::Tensor: the ONNX element type's name ("FLOAT", "INT64", "BOOL", ...). Integer
  // and bool tensors are held as exact doubles in `t`; this keeps what they were so the type
  // check (check_attributes) can refuse them where an op takes another type.
  std::string elem_type;
};

// Kind names as ONNX writes them ("INT", "FLOATS", ...), for messages.
const char* kind_name(Attribute::Kind k);

struct ModelNode {
  std::string name;  // as in the file (may be empty)
  std::string op;    // ONNX op type, e.g. "Conv"
  std::string domain;
  std::vector<std::string> inputs, outputs;  // "" for an omitted optional input
  std::map<std::string, Attribute> attributes;

  // Typed getters: the fallback when the attribute is absent; InputError when it is present
  // with another kind (an INT epsilon is never read as "absent, so 1e-5"). Model::parse
  // already refuses the wrong kinds of every attribute of the ops it knows
  // (expected_attribute_kind); the getters hold the same rule for nodes built in code.
  const Attribute* attr(const std::string& key) const;
  std::int64_t int_attr(const std::string& key, std::int64_t fallback) const;
  double float_attr(const std::string& key, double fallback) const;
  std::vector<std::int64_t> ints_attr(const std::string& key) const;  // empty if absent
  std::string string_attr(const std::string& key, const std::string& fallback) const;
};

struct ValueInfo {
  std::string name;
  Shape shape;  // -1: unknown dimension
  std::optional<DType> dtype;
  std::string elem_type;  // the ONNX element type's name ("FLOAT", "INT64", ...); "" if not given
};

struct Model {
  std::string path;
  std::int64_t opset = 0;  // default-domain opset version
  std::string producer;
  std::vector<ModelNode> nodes;
  std::map<std::string, Tensor> initializers;                  // floating ones
  std::map<std::string, std::vector<std::int64_t>> int_inits;  // integer ones (and their shape below)
  std::map<std::string, Shape> int_init_shapes;
  std::map<std::string, std::string> int_init_type;  // per int_inits entry: its ONNX type ("INT64", "BOOL", ...)
  std::map<std::string, std::string> unread_inits;   // initializers of types foldcheck does not read -> the type
  // Identity outputs of initializers -> the initializer they alias (never another alias):
  // shared, not copied. initializer() and int_initializer() resolve them.
  std::map<std::string, std::string> aliases;
  std::vector<ValueInfo> inputs, outputs;

  // Throws InputError when the file cannot be read or parsed, or an initializer's dims do
  // not match its data (or exceed the element limit, limits.hpp).
  static Model load(const std::string& path);
  // The same from the file's bytes; `path` names it and locates external data.
  static Model parse(const std::string& bytes, const std::string& path);

  const Tensor* initializer(const std::string& name) const;  // null if not a floating initializer
  // An integer initializer's values (and its shape into `shape` if given); null if none.
  const std::vector<std::int64_t>* int_initializer(const std::string& name, Shape* shape = nullptr) const;
  // The floating initializer `name` to change in place; an alias becomes a copy of its own
  // first, so changing it leaves the initializer it aliased as it was, and the Identity that
  // computed the alias computes a fresh name nothing reads (a value is an initializer or a
  // node's output, never both: check_graph). std::out_of_range if none.
  Tensor& own_initializer(const std::string& name);
  // The initializer name an alias stands for; `name` itself otherwise.
  const std::string& resolve(const std::string& name) const;
  // Whether `name` is defined before any node runs: a graph input or an initializer.
  bool defines(const std::string& name) const;
  // The node producing value `name` and the nodes consuming it (indices into nodes).
  std::optional<std::size_t> producer_of(const std::string& name) const;
  std::vector<std::size_t> consumers_of(const std::string& name) const;
  bool is_graph_output(const std::string& name) const;
};

// The graph is valid single-assignment in topological order: every node input is a graph
// input, an initializer or the output of an EARLIER node (so no cycles); no value is
// computed twice or is both a node output and a graph input; every graph output is
// defined. InputError naming the file, the node (op, index, name) and the value otherwise.
// Model::parse calls it; run_model calls it again for models built in code.
void check_graph(const Model& m);

// The attribute kind the ONNX operator spec gives `key` of default-domain op `op`; nullopt
// for attributes and ops the table does not list (model_support refuses unlisted
// attributes of the ops it runs).
std::optional<Attribute::Kind> expected_attribute_kind(const std::string& op, const std::string& key);

}  // namespace foldcheck
