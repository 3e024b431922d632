#pragma once
// The fuzz targets' bodies: each reader foldcheck has, on one input of arbitrary bytes.
// libFuzzer drives them (fuzz_main.cpp, clang builds with FOLDCHECK_FUZZ=ON); the test
// suite runs every seed in fuzz/corpus/ and every crash kept in fuzz/regressions/ through
// the same bodies in every build (tests/test_fuzz_regressions.cpp).
//
// Contract: a body returns normally when the input is read or refused the way the CLI
// refuses bad input (InputError; for JSON, also a value of the wrong JSON type, which the
// CLI reports as bad input). Anything else escapes: a crash for the fuzzer, a failed test
// for the suite. Sanitizers turn memory errors, leaks and UB into crashes.
#include <map>
#include <string>

namespace foldcheck::fuzz {

// A small element limit (2^20) so that an accepted input never allocates more than a few
// tens of MB per run; the limit checks are what is fuzzed, the real default only scales them.
void use_small_limits();

void npy(const std::string& bytes);          // .npy: float and integer readers, then serialize
void npz(const std::string& bytes);          // .npz: libzip, then each member as .npy
void onnx(const std::string& bytes);         // ONNX: load, pattern finder, each pair's parameters
void case_json(const std::string& bytes);    // case files: load and materialize
void suite_json(const std::string& bytes);   // suite files: plan every entry
void report_json(const std::string& bytes);  // reports: compare and the report writers
// ONNX end to end: load, then run the model (float32 unfused, and fused with its pairs)
// on its seeded input under an element limit of 4096 (restored after), so every op's shape
// checks, attribute checks and graph checks are fuzzed, not only the loader.
void model_run(const std::string& bytes);

using Body = void (*)(const std::string&);
// Target name ("fuzz_npy", ...) -> body.
const std::map<std::string, Body>& bodies();

}  // namespace foldcheck::fuzz
