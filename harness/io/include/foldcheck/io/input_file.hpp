#pragma once
// Reading the files foldcheck is given: one place that turns every way a read can fail
// into an InputError with the path and the system's reason, and that refuses a file
// larger than the element limit allows before reading it.
//
// Contract: read_input_file returns the whole file or throws InputError "PATH: cannot
// read KIND (REASON)" (missing, a directory, no permission, an I/O error) or "PATH: N
// bytes, over the limit ..." when the file is larger than max_input_bytes(). Regular files
// are sized before any allocation. Pipes and devices have no size: their first bytes go
// to the reader's HeadCheck, which refuses what cannot start its format (/dev/zero as a
// .npy is refused after one read, not 4 GB later) and caps the read at the size a header
// declares; without a declared size they are held to one byte per element of the limit
// (max_elements() bytes), not 16.
// parse_json_text parses JSON with a nesting limit (kMaxJsonDepth): foldcheck's own files
// nest fewer than 10 levels, and a file of a million '[' must be an error, not a stack
// overflow in a recursive consumer.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace foldcheck {

inline constexpr int kMaxJsonDepth = 64;

// 16 bytes per element allowed by max_elements() (a float64 .npy needs 8, a JSON number
// rarely more than 16 characters), plus 1 MiB for headers.
std::uint64_t max_input_bytes();

// What a format's first bytes say, for files that are not regular: InputError if they
// cannot start such a file; `more` while the head is too short to tell; otherwise the
// file's total size when the head declares it (a .npy header), or nullopt (no size).
struct HeadVerdict {
  bool more = false;
  std::optional<std::uint64_t> total;
};
using HeadCheck = std::function<HeadVerdict(const std::string& head)>;

std::string read_input_file(const std::string& path, const std::string& kind, const HeadCheck& head = {});

// Head checks of the formats foldcheck reads (`where` names the file in messages).
HeadVerdict json_head(const std::string& head, const std::string& where);
HeadVerdict onnx_head(const std::string& head, const std::string& where);

// `where` names the source in messages (usually the path).
nlohmann::json parse_json_text(const std::string& text, const std::string& where);
nlohmann::json read_json_input(const std::string& path, const std::string& kind);

// nlohmann's what() reads "[json.exception.parse_error.101] parse error at ...": the text
// after the tag, for messages that name the file themselves.
std::string json_error_reason(const nlohmann::json::exception& e);

}  // namespace foldcheck
