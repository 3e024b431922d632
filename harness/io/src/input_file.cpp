// Reading input files with one set of error messages (input_file.hpp).
#include "foldcheck/io/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <new>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/io/limits.hpp"
#include "foldcheck/io/output_file.hpp"

namespace foldcheck {
namespace {

[[noreturn]] void cannot_read(const std::string& path, const std::string& kind, int err) {
  throw InputError(fmt::format("{}: cannot read {} ({})", path, kind, std::strerror(err)));
}

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::uint64_t max_input_bytes() { return 16 * static_cast<std::uint64_t>(max_elements()) + (std::uint64_t(1) << 20); }

std::string read_input_file(const std::string& path, const std::string& kind, const HeadCheck& head) {
  if (path.empty()) throw InputError(fmt::format("empty path for the {}", kind));
  // The system reads a path up to its first NUL: "a\0/../../etc/passwd" would open "a".
  if (path.find('\0') != std::string::npos) throw InputError(fmt::format("{}: the path of a {} holds a NUL byte", path, kind));
  const Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) cannot_read(path, kind, errno);
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) cannot_read(path, kind, errno);
  if (S_ISDIR(st.st_mode)) cannot_read(path, kind, EISDIR);
  // No output of this run may replace a file it reads (output_file.hpp).
  if (S_ISREG(st.st_mode)) note_input_file(static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino));
  const std::uint64_t limit = max_input_bytes();
  auto too_big = [&](const std::string& size) {
    throw InputError(fmt::format(fmt::runtime("{}: {} bytes, over the limit of {} bytes for a {} (raise it with " + field("max_elements") + " or "
                                 "FOLDCHECK_MAX_ELEMENTS)"),
                                 path, size, limit, kind));
  };
  std::string bytes;
  if (S_ISREG(st.st_mode)) {
    if (static_cast<std::uint64_t>(st.st_size) > limit) too_big(std::to_string(st.st_size));
    bytes.reserve(static_cast<std::size_t>(st.st_size));
  }
  // Not regular: the head decides early. A declared total caps the read one byte past it,
  // so the parser still sees (and reports) data after what the header describes.
  bool judging = !S_ISREG(st.st_mode) && head;
  std::uint64_t cap = limit;
  // A stream with no declared size (/dev/urandom as a model, a pipe of JSON) could only be
  // refused at the file limit, 16 bytes per element: 4.3 GB read, and twice that held while
  // the buffer grows. It is held to one byte per element instead (268 MB by default).
  const std::uint64_t stream_limit = std::min<std::uint64_t>(limit, static_cast<std::uint64_t>(max_elements()));
  char buf[1 << 16];
  while (true) {
    const std::uint64_t room = cap < limit ? cap + 1 - std::min<std::uint64_t>(bytes.size(), cap + 1) : sizeof buf;
    if (room == 0) break;
    const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(sizeof buf, room));
    const ssize_t got = ::read(f.fd, buf, want);
    if (got < 0) {
      if (errno == EINTR) continue;
      cannot_read(path, kind, errno);
    }
    if (got == 0) break;
    if (bytes.size() + static_cast<std::size_t>(got) > limit) too_big("more than " + std::to_string(limit));
    if (!S_ISREG(st.st_mode) && cap == limit && bytes.size() + static_cast<std::size_t>(got) > stream_limit)
      throw InputError(fmt::format(fmt::runtime("{}: more than {} bytes from a pipe or device: a {} with no size to check first is held "
                                   "to one byte per element of the limit (raise it with " + field("max_elements") + " or "
                                   "FOLDCHECK_MAX_ELEMENTS)"),
                                   path, stream_limit, kind));
    try {
      bytes.append(buf, static_cast<std::size_t>(got));
    } catch (const std::bad_alloc&) {  // a stream (/dev/urandom as a model) under a memory limit
      throw InputError(fmt::format("{}: cannot hold the {} in memory ({} bytes read so far, and more coming)", path, kind,
                                   bytes.size()));
    }
    if (judging) {
      const HeadVerdict v = head(bytes);
      judging = v.more;
      if (v.total) {
        if (*v.total > limit) too_big(std::to_string(*v.total) + " (as its header declares)");
        cap = *v.total;
      }
    }
  }
  return bytes;
}

// JSON text starts (after whitespace) with a value; foldcheck's files are objects or arrays.
HeadVerdict json_head(const std::string& head, const std::string& where) {
  const std::size_t i = head.find_first_not_of(" \t\r\n");
  if (i == std::string::npos) return {true, std::nullopt};
  if (head[i] != '{' && head[i] != '[')
    throw InputError(fmt::format("{}: invalid JSON: starts with byte 0x{:02x}, not '{{' or '['", where,
                                 static_cast<unsigned char>(head[i])));
  return {};
}

// A serialized ModelProto starts with a protobuf key: a varint whose wire type is one
// protobuf defines (0, 1, 2 or 5) and whose field number is not 0. Only a one-byte key
// (fields 1 to 15) is judged; a byte with the continuation bit passes to the parser.
HeadVerdict onnx_head(const std::string& head, const std::string& where) {
  const auto key = static_cast<unsigned char>(head[0]);
  const unsigned field = (key & 0x7f) >> 3, wire = key & 7;
  if ((key & 0x80) == 0 && (field < 1 || (wire != 0 && wire != 1 && wire != 2 && wire != 5)))
    throw InputError(fmt::format("{}: not an ONNX model (starts with byte 0x{:02x}, not a protobuf field)", where, key));
  return {};
}

namespace {

constexpr std::uint64_t kDomBytesPerValue = 48;  // 16 per json value, up to twice that while an array grows

// A first pass over the text that builds nothing: nesting is bounded (the DOM and the code
// reading it are recursive), and a key given twice in one object is refused (JSON leaves
// duplicates undefined and nlohmann keeps the last, so `"eps": 1e-5, ..., "eps": 0.1` would
// silently use one of two values the user wrote). nlohmann's callback parser would do both
// in one pass, but it scans the parent's elements at the end of every object: quadratic in
// an array of objects (330k `{}` took 84 s). Syntax errors are left to the parse after it.
class JsonGuard : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit JsonGuard(const std::string& where) : where_(where) {}
  std::uint64_t values() const { return values_; }
  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  // No name or path foldcheck reads may hold a NUL: the system would stop at it ("a\0/../x"
  // names "a"), and path normalization would drop it with a component.
  bool string(string_t& v) override {
    if (v.find('\0') != std::string::npos) nul(v);
    return value();
  }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    enter();
    objects_.emplace_back();
    return true;
  }
  bool key(string_t& k) override {
    if (k.find('\0') != std::string::npos) nul(k);
    if (!objects_.back().insert(k).second)
      throw InputError(fmt::format("{}: invalid JSON: key '{}' appears twice in one object", where_, k));
    return true;
  }
  bool end_object() override {
    objects_.pop_back();
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override {
    enter();
    return true;
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  // Every scalar counts: a DOM value costs ~16 bytes, and up to as much again while its
  // array grows, where "0," is 2 bytes of text (64 MB of it peaked at 2.2 GB). More values
  // than the element limit cannot all be elements of a tensor, so no file holding them is
  // parsed; fewer must still fit in memory as a DOM.
  bool value() {
    if (++values_ > static_cast<std::uint64_t>(max_elements()) + kSlackValues)
      throw InputError(fmt::format(fmt::runtime("{}: holds more than {} values, over the element limit of {} (raise it with " +
                                   field("max_elements") + " or FOLDCHECK_MAX_ELEMENTS)"),
                                   where_, static_cast<std::uint64_t>(max_elements()) + kSlackValues, max_elements()));
    return true;
  }
  static constexpr std::uint64_t kSlackValues = 1 << 16;  // the fields around a tensor's values
  [[noreturn]] void nul(const std::string& s) {
    throw InputError(fmt::format("{}: invalid JSON: the string '{}' holds a NUL byte (\\u0000), which no name or path can",
                                 where_, s.substr(0, 200)));
  }
  void enter() {
    if (++depth_ > kMaxJsonDepth)
      throw InputError(fmt::format("{}: invalid JSON: nested deeper than {} levels", where_, kMaxJsonDepth));
  }
  const std::string& where_;
  int depth_ = 0;
  std::uint64_t values_ = 0;
  std::vector<std::set<std::string>> objects_;
};

}  // namespace

nlohmann::json parse_json_text(const std::string& text, const std::string& where) {
  using json = nlohmann::json;
  JsonGuard guard(where);
  try {
    if (!json::sax_parse(text, &guard)) {
      [[maybe_unused]] const json j = json::parse(text);  // a syntax error: this parse throws it, saying where
    }
    check_fits_in_memory(guard.values(), kDomBytesPerValue, where);
    return json::parse(text);
  } catch (const json::exception& e) {
    // Syntax errors, and numbers past binary64 (out_of_range.406, "1e400").
    throw InputError(fmt::format("{}: invalid JSON: {}", where, json_error_reason(e)));
  }
}

std::string json_error_reason(const nlohmann::json::exception& e) {
  const std::string why = e.what();
  const auto tag_end = why.find("] ");
  if (why.rfind("[json.exception", 0) != 0 || tag_end == std::string::npos) return why;
  return why.substr(tag_end + 2);
}

nlohmann::json read_json_input(const std::string& path, const std::string& kind) {
  return parse_json_text(read_input_file(path, kind, [&](const std::string& h) { return json_head(h, path); }), path);
}

}  // namespace foldcheck
