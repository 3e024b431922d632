// libFuzzer target: the .npy readers (float and integer) on arbitrary bytes. Any input
// must either parse or throw InputError; nothing else (crash, leak, UB, huge allocation).
#include <cstddef>
#include <cstdint>
#include <string>

#include "foldcheck/errors.hpp"
#include "foldcheck/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const foldcheck::Tensor t = foldcheck::parse_npy(bytes, "fuzz.npy");
    (void)foldcheck::serialize_npy(t);
  } catch (const foldcheck::InputError&) {
  }
  return 0;
}
