// A fake compiler for `foldcheck bisect --cmd` tests (run through tests/fake_compiler.sh).
//
//   fake_compiler_impl [--enabled P,Q] [--disabled P,Q] -o OUT.npy [--write-reference R.npy]
//
// It "compiles and runs" y_j = sum_k a_jk b_k (256 outputs, 512 terms, seeded positive
// float32 data) in float32. Its passes: Reorder (pairwise summation), Vectorize (8 partial
// sums), FuseOps (FMA accumulation), FoldConstant (no numerical effect) change only the
// rounding; FastMath multiplies every output by 1 + 2^-10, a change of value that rounding
// cannot explain. Without --enabled every known pass not in --disabled runs. Exit 3 with
// BREAK in the enabled passes (a crashing pass), for the failure tests.
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "foldcheck/io/npy.hpp"
#include "foldcheck/io/number_list.hpp"

namespace {

std::set<std::string> split(const std::string& s) {
  const std::vector<std::string> v = foldcheck::split_names(s, "passes");
  return {v.begin(), v.end()};
}

}  // namespace

int main(int argc, char** argv) {
  std::string out, reference, enabled_arg, disabled_arg;
  bool have_enabled = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "fake_compiler: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "-o") out = next();
    else if (a == "--write-reference") reference = next();
    else if (a == "--enabled") { enabled_arg = next(); have_enabled = true; }
    else if (a == "--disabled") disabled_arg = next();
    else {
      std::cerr << "fake_compiler: unknown argument " << a << "\n";
      return 2;
    }
  }
  const std::set<std::string> known{"FoldConstant", "Reorder", "Vectorize", "FuseOps", "FastMath", "BREAK"};
  std::set<std::string> on;
  if (have_enabled) on = split(enabled_arg);
  else
    for (const std::string& p : known)
      if (!split(disabled_arg).count(p) && p != "BREAK") on.insert(p);
  if (on.count("BREAK")) {
    std::cerr << "fake_compiler: internal error in pass BREAK\n";
    return 3;
  }
  constexpr int J = 256, K = 512;
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> ud(0.1, 1.0);
  std::vector<float> a(J * K), b(K);
  for (float& v : a) v = static_cast<float>(ud(rng));
  for (float& v : b) v = static_cast<float>(ud(rng));
  foldcheck::Tensor y{{J}, std::vector<double>(J), foldcheck::DType::Float32};
  foldcheck::Tensor exact{{J}, std::vector<double>(J), foldcheck::DType::Float64};
  for (int j = 0; j < J; ++j) {
    long double e = 0;  // products of floats are exact in double; the long double sum is far below float32 ULPs
    for (int k = 0; k < K; ++k) e += static_cast<long double>(static_cast<double>(a[j * K + k]) * b[k]);
    exact.data[j] = static_cast<double>(e);
    auto term = [&](int k) { return a[j * K + k] * b[k]; };
    auto add = [&](float acc, int k) { return on.count("FuseOps") ? std::fma(a[j * K + k], b[k], acc) : acc + term(k); };
    float s = 0;
    if (on.count("Reorder")) {
      std::vector<float> p(K);
      for (int k = 0; k < K; ++k) p[k] = term(k);
      for (int w = 1; w < K; w *= 2)
        for (int k = 0; k + w < K; k += 2 * w) p[k] += p[k + w];
      s = p[0];
    } else if (on.count("Vectorize")) {
      float lanes[8] = {};
      for (int k = 0; k < K; ++k) lanes[k % 8] = add(lanes[k % 8], k);
      for (float l : lanes) s += l;
    } else {
      for (int k = 0; k < K; ++k) s = add(s, k);
    }
    if (on.count("FastMath")) s *= 1.0f + 0x1p-10f;
    y.data[j] = s;
  }
  if (!out.empty()) foldcheck::write_npy(out, y);
  if (!reference.empty()) foldcheck::write_npy(reference, exact);
  return 0;
}
