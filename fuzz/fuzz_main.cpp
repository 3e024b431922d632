// One libFuzzer executable per reader: FOLDCHECK_FUZZ_BODY names the body (targets.hpp)
// this executable was built for.
#include <cstddef>
#include <cstdint>
#include <string>

#include "targets.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  foldcheck::fuzz::use_small_limits();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  foldcheck::fuzz::FOLDCHECK_FUZZ_BODY(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
