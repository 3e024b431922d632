#include "onnx_builder.hpp"

#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>

#include "foldcheck/layer/fold_pass.hpp"

namespace foldcheck::testing {
namespace {

int onnx_type(DType dt) {
  switch (dt) {
    case DType::Float32: return onnx::TensorProto::FLOAT;
    case DType::Float64: return onnx::TensorProto::DOUBLE;
    case DType::Float16: return onnx::TensorProto::FLOAT16;
    case DType::BFloat16: return onnx::TensorProto::BFLOAT16;
  }
  return 0;
}

}  // namespace

OnnxBuilder::OnnxBuilder(std::int64_t opset) {
  model.set_ir_version(8);
  model.set_producer_name("foldcheck-tests");
  model.add_opset_import()->set_version(opset);
  model.mutable_graph()->set_name("test");
}

namespace {
// A float tensor's name and shape (-1: unknown dimension).
void describe(onnx::ValueInfoProto* v, const std::string& name, const std::vector<std::int64_t>& shape) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  for (const auto d : shape) {
    auto* dim = t->mutable_shape()->add_dim();
    if (d >= 0) dim->set_dim_value(d);
  }
}
}  // namespace

void OnnxBuilder::input(const std::string& name, const std::vector<std::int64_t>& shape) {
  describe(model.mutable_graph()->add_input(), name, shape);
}

void OnnxBuilder::output(const std::string& name, const std::vector<std::int64_t>& shape) {
  describe(model.mutable_graph()->add_output(), name, shape);
}

void OnnxBuilder::init(const std::string& name, const std::vector<std::int64_t>& shape, const std::vector<double>& values,
                       DType dt, Encoding enc) {
  auto* t = model.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx_type(dt));
  for (const auto d : shape) t->add_dims(d);
  std::string bytes;
  for (const double v : values) {
    if (dt == DType::Float32) { const float f = static_cast<float>(v); bytes.append(reinterpret_cast<const char*>(&f), 4); }
    else if (dt == DType::Float64) bytes.append(reinterpret_cast<const char*>(&v), 8);
    else { const std::uint16_t b = to_bits(dt, v); bytes.append(reinterpret_cast<const char*>(&b), 2); }
  }
  if (enc == Encoding::Raw) t->set_raw_data(bytes);
  else if (enc == Encoding::External) {
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    auto add = [&](const std::string& k, const std::string& v) {
      auto* e = t->add_external_data();
      e->set_key(k);
      e->set_value(v);
    };
    if (external_file.empty()) external_file = "weights.bin";
    add("location", external_file);
    add("offset", std::to_string(external_bytes.size()));
    add("length", std::to_string(bytes.size()));
    external_bytes += bytes;
  } else {
    for (const double v : values) {
      if (dt == DType::Float32) t->add_float_data(static_cast<float>(v));
      else if (dt == DType::Float64) t->add_double_data(v);
      else t->add_int32_data(to_bits(dt, v));
    }
  }
}

void OnnxBuilder::init_int64(const std::string& name, const std::vector<std::int64_t>& values) {
  auto* t = model.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<std::int64_t>(values.size()));
  for (const auto v : values) t->add_int64_data(v);
}

onnx::NodeProto& OnnxBuilder::node(const std::string& op, const std::string& name, const std::vector<std::string>& inputs,
                                   const std::vector<std::string>& outputs) {
  auto* n = model.mutable_graph()->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  return *n;
}

void OnnxBuilder::attr(onnx::NodeProto& n, const std::string& key, std::int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(key);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
void OnnxBuilder::attr(onnx::NodeProto& n, const std::string& key, float v) {
  auto* a = n.add_attribute();
  a->set_name(key);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}
void OnnxBuilder::attr(onnx::NodeProto& n, const std::string& key, const std::vector<std::int64_t>& v) {
  auto* a = n.add_attribute();
  a->set_name(key);
  a->set_type(onnx::AttributeProto::INTS);
  for (const auto x : v) a->add_ints(x);
}
void OnnxBuilder::attr(onnx::NodeProto& n, const std::string& key, const std::string& v) {
  auto* a = n.add_attribute();
  a->set_name(key);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

void OnnxBuilder::save(const std::string& path) const {
  // External data goes to "<model stem>.data" beside the model (models saved side by side
  // keep their own data files).
  onnx::ModelProto m = model;
  const std::string data_name = std::filesystem::path(path).stem().string() + ".data";
  for (auto& t : *m.mutable_graph()->mutable_initializer())
    for (auto& kv : *t.mutable_external_data())
      if (kv.key() == "location") kv.set_value(data_name);
  std::ofstream out(path, std::ios::binary);
  m.SerializeToOstream(&out);
  if (!external_file.empty()) {
    std::ofstream ext(std::filesystem::path(path).parent_path() / data_name, std::ios::binary);
    ext << external_bytes;
  }
}

OnnxBuilder bn_fixture(const FixtureOptions& o, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd;
  std::uniform_real_distribution<double> ud(0.5, 1.5);
  auto vec = [&](std::size_t n, double scale) {
    std::vector<double> v(n);
    for (double& x : v) x = static_cast<float>(scale * nd(rng));
    return v;
  };
  struct Layer {
    std::string name, op;
    std::vector<std::int64_t> wshape;
    std::vector<double> w, b;  // b empty: no bias
    std::vector<double> gamma, beta, mean, var;
  };
  auto bn_params = [&](Layer& l, std::size_t c) {
    for (std::size_t i = 0; i < c; ++i) {
      l.gamma.push_back(static_cast<float>(ud(rng)));
      l.beta.push_back(static_cast<float>(0.1 * nd(rng)));
      l.mean.push_back(static_cast<float>(0.1 * nd(rng)));
      l.var.push_back(static_cast<float>(ud(rng)));
    }
  };
  Layer a{"conv_a", "Conv", {8, 4, 3, 3}, vec(8 * 4 * 9, 0.2), vec(8, 0.1), {}, {}, {}, {}};
  bn_params(a, 8);
  Layer b{"conv_b", "Conv", {6, 8, 1, 1}, vec(6 * 8, 0.3), {}, {}, {}, {}, {}};
  bn_params(b, 6);
  Layer fc{"fc", "Gemm", {5, 216}, vec(5 * 216, 0.05), vec(5, 0.1), {}, {}, {}, {}};
  bn_params(fc, 5);
  // bn_c's parameters (unpaired)
  Layer c;
  bn_params(c, 6);
  if (o.folded) {
    for (Layer* l : {&a, &b, &fc}) {
      const std::int64_t per = static_cast<std::int64_t>(l->w.size()) / l->wshape[0];
      const ref::BnParams bn{l->gamma, l->beta, l->mean, l->var, static_cast<double>(1e-5f)};
      const FoldedParams fp = fold_parameters(l->w, per, l->b, bn, DType::Float32, o.recipe, {});
      if (!fp.post_add.empty())  // TVM's separate shift would need an Add node the fixture does not build
        throw std::invalid_argument("bn_fixture: recipe " + std::string(name(o.recipe)) + " leaves a separate shift for " + l->name);
      l->w = fp.weight;
      l->b = fp.bias;
      if (l->name == o.corrupt_layer) {
        for (std::int64_t k = 0; k < per; ++k)
          l->w[static_cast<std::size_t>(o.corrupt_channel * per + k)] =
              static_cast<float>(l->w[static_cast<std::size_t>(o.corrupt_channel * per + k)] * (1 + o.corrupt_rel));
        l->b[static_cast<std::size_t>(o.corrupt_channel)] =
            static_cast<float>(l->b[static_cast<std::size_t>(o.corrupt_channel)] * (1 + o.corrupt_rel));
      }
    }
  }
  OnnxBuilder m;
  m.input("X", {1, 4, 6, 6});
  m.output("Y", {1, 5});
  auto layer_inits = [&](const Layer& l, Encoding enc) {
    m.init(l.name + ".weight", l.wshape, l.w, DType::Float32, enc);
    if (!l.b.empty()) m.init(l.name + ".bias", {static_cast<std::int64_t>(l.b.size())}, l.b, DType::Float32, enc);
  };
  auto bn_inits = [&](const std::string& n, const Layer& l) {
    const auto c = static_cast<std::int64_t>(l.gamma.size());
    m.init(n + ".gamma", {c}, l.gamma);
    m.init(n + ".beta", {c}, l.beta, DType::Float32, Encoding::Typed);
    m.init(n + ".mean", {c}, l.mean);
    m.init(n + ".var", {c}, l.var);
  };
  layer_inits(a, Encoding::Raw);
  layer_inits(b, Encoding::Typed);
  layer_inits(fc, Encoding::External);
  auto with_bias = [](const Layer& l, const std::string& x) {
    std::vector<std::string> in{x, l.name + ".weight"};
    if (!l.b.empty()) in.push_back(l.name + ".bias");
    return in;
  };
  auto bn_node = [&](const std::string& n, const std::string& x, const std::string& y) {
    auto& node = m.node("BatchNormalization", n, {x, n + ".gamma", n + ".beta", n + ".mean", n + ".var"}, {y});
    OnnxBuilder::attr(node, "epsilon", 1e-5f);
  };
  auto& ca = m.node("Conv", "conv_a", with_bias(a, "X"), {"a"});
  OnnxBuilder::attr(ca, "kernel_shape", std::vector<std::int64_t>{3, 3});
  OnnxBuilder::attr(ca, "pads", std::vector<std::int64_t>{1, 1, 1, 1});
  m.node("Identity", "id_a", {"a"}, {"a_id"});
  if (!o.folded) {
    bn_inits("bn_a", a);
    bn_node("bn_a", "a_id", "a_bn");
  }
  m.node("Relu", "relu_a", {o.folded ? "a_id" : "a_bn"}, {"a_relu"});
  m.node("Conv", "conv_b", with_bias(b, "a_relu"), {"b"});
  if (!o.folded) {
    bn_inits("bn_b", b);
    bn_node("bn_b", "b", "b_bn");
  }
  m.node("Relu", "relu_b", {o.folded ? "b" : "b_bn"}, {"b_relu"});
  bn_inits("bn_c", c);
  bn_node("bn_c", "b_relu", "c_bn");
  m.node("Flatten", "flatten", {"c_bn"}, {"flat"});
  auto& g = m.node("Gemm", "fc", with_bias(fc, "flat"), {"f"});
  OnnxBuilder::attr(g, "transB", std::int64_t{1});
  if (!o.folded) {
    bn_inits("bn_fc", fc);
    bn_node("bn_fc", "f", "Y");
  } else {
    m.node("Identity", "out", {"f"}, {"Y"});
  }
  return m;
}

}  // namespace foldcheck::testing
