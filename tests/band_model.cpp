// The model of the output band's tests (band_model.hpp).
#include "band_model.hpp"

#include "onnx_builder.hpp"

namespace foldcheck_band_test {

using foldcheck::testing::OnnxBuilder;

namespace {

void bn(OnnxBuilder& b, const std::string& name, const std::string& in, const std::string& out, std::int64_t C,
        std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0.5, 1.5);
  std::vector<double> g(C), v(C);
  for (auto& x : g) x = static_cast<float>(u(rng));
  for (auto& x : v) x = static_cast<float>(u(rng));
  b.init(name + "_g", {C}, g);
  b.init(name + "_b", {C}, random_values(C, 0.1, rng));
  b.init(name + "_m", {C}, random_values(C, 0.1, rng));
  b.init(name + "_v", {C}, v);
  auto& n = b.node("BatchNormalization", name, {in, name + "_g", name + "_b", name + "_m", name + "_v"}, {out});
  OnnxBuilder::attr(n, "epsilon", 1e-5f);  // explicit: the eps direction's differences move it
}

}  // namespace

Model band_model(const std::filesystem::path& dir) {
  std::mt19937_64 rng(11);
  OnnxBuilder b;
  b.input("X", {1, 4, 10, 10});
  b.output("Y", {1, 48});
  b.init("wa", {8, 4, 3, 3}, random_values(288, 0.3, rng));
  auto& ca = b.node("Conv", "a", {"X", "wa"}, {"ya"});
  OnnxBuilder::attr(ca, "pads", std::vector<std::int64_t>{1, 1, 1, 1});
  bn(b, "bna", "ya", "za", 8, rng);
  b.init("lo", {}, {0.0});
  b.init("hi", {}, {6.0});
  b.node("Clip", "clip", {"za", "lo", "hi"}, {"ca"});
  b.init("wb", {8, 4, 3, 3}, random_values(288, 0.3, rng));
  auto& cb = b.node("Conv", "b", {"ca", "wb"}, {"yb"});
  OnnxBuilder::attr(cb, "pads", std::vector<std::int64_t>{1, 1, 1, 1});
  OnnxBuilder::attr(cb, "group", std::int64_t{2});
  bn(b, "bnb", "yb", "zb", 8, rng);
  b.node("Add", "add", {"zb", "ca"}, {"s"});
  b.node("Relu", "relu", {"s"}, {"r"});
  b.init("k", {1, 8, 1, 1}, random_values(8, 0.2, rng, 1.0));
  b.node("Mul", "mul", {"r", "k"}, {"rk"});
  auto& mp = b.node("MaxPool", "pool", {"rk"}, {"p"});
  OnnxBuilder::attr(mp, "kernel_shape", std::vector<std::int64_t>{3, 3});
  OnnxBuilder::attr(mp, "strides", std::vector<std::int64_t>{2, 2});
  OnnxBuilder::attr(mp, "pads", std::vector<std::int64_t>{1, 1, 1, 1});
  auto& ap = b.node("AveragePool", "avg", {"p"}, {"q"});
  OnnxBuilder::attr(ap, "kernel_shape", std::vector<std::int64_t>{2, 2});
  b.init("wc", {8, 1, 3, 3}, random_values(72, 0.3, rng));
  b.init("bc", {8}, random_values(8, 0.1, rng));
  auto& cc = b.node("Conv", "c", {"q", "wc", "bc"}, {"yc"});
  OnnxBuilder::attr(cc, "pads", std::vector<std::int64_t>{1, 1, 1, 1});
  OnnxBuilder::attr(cc, "group", std::int64_t{8});
  auto& cat = b.node("Concat", "cat", {"q", "yc"}, {"cq"});
  OnnxBuilder::attr(cat, "axis", std::int64_t{1});
  b.init("wd", {16, 16, 1, 1}, random_values(256, 0.3, rng));
  auto& cd = b.node("Conv", "d", {"cq", "wd"}, {"yd"});
  OnnxBuilder::attr(cd, "strides", std::vector<std::int64_t>{2, 2});
  bn(b, "bnd", "yd", "zd", 16, rng);
  b.node("GlobalAveragePool", "gap", {"zd"}, {"g"});
  b.node("Flatten", "flat", {"g"}, {"f"});
  b.node("Flatten", "flat2", {"zd"}, {"f2"});
  auto& cat2 = b.node("Concat", "cat2", {"f", "f2"}, {"ff"});
  OnnxBuilder::attr(cat2, "axis", std::int64_t{1});
  b.init("wf", {48, 80}, random_values(std::size_t{48} * 80, 0.2, rng));
  b.init("bf", {48}, random_values(48, 0.1, rng));
  auto& fc = b.node("Gemm", "fc", {"ff", "wf", "bf"}, {"Y"});
  OnnxBuilder::attr(fc, "transB", std::int64_t{1});
  const auto path = dir / "band_model.onnx";
  b.save(path.string());
  return Model::load(path.string());
}

}  // namespace foldcheck_band_test
