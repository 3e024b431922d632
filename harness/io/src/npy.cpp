#include "foldcheck/io/npy.hpp"

#include <zip.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/io/input_file.hpp"
#include "foldcheck/io/limits.hpp"
#include "foldcheck/io/output_file.hpp"

namespace foldcheck {
namespace {

std::string dtype_descr(DType t) {
  switch (t) {
    case DType::Float64: return "<f8";
    case DType::Float16: return "<f2";
    default: return "<f4";
  }
}

}  // namespace

namespace {

struct NpyHeader {
  std::string descr;
  Shape shape;
  std::size_t data_offset = 0;
  std::int64_t count = 0;
};

// NumPy refuses headers over 10000 bytes by default (np.load's max_header_size) as unsafe
// to parse; the arrays foldcheck reads have headers under 200 bytes.
constexpr std::size_t kMaxHeaderBytes = 10000;

// The header is a Python dict literal: {'descr': '<f4', 'fortran_order': False,
// 'shape': (2, 3), }. This reads exactly that grammar (quoted keys; values a quoted
// string, True/False, or a tuple of non-negative integers) and nothing more.
class HeaderDict {
 public:
  HeaderDict(const std::string& text, const std::string& what) : s_(text), what_(what) {}

  void parse(NpyHeader& h) {
    bool have_descr = false, have_order = false, have_shape = false;
    ws();
    expect('{');
    while (true) {
      ws();
      if (peek() == '}') { ++i_; break; }
      const std::string key = quoted();
      ws();
      expect(':');
      ws();
      if (key == "descr") { h.descr = quoted(); have_descr = true; }
      else if (key == "fortran_order") {
        if (word("True")) throw InputError(what_ + ": Fortran-ordered arrays are not supported (save with C order)");
        if (!word("False")) fail("fortran_order must be True or False");
        have_order = true;
      } else if (key == "shape") { h.shape = tuple(); have_shape = true; }
      else fail("unexpected key '" + key + "'");
      ws();
      if (peek() == ',') ++i_;
      else if (peek() != '}') fail("expected ',' or '}'");
    }
    ws();
    if (i_ != s_.size()) fail("text after the dict");
    if (!have_descr) fail("no 'descr'");
    if (!have_order) fail("no 'fortran_order'");
    if (!have_shape) fail("no 'shape'");
  }

 private:
  [[noreturn]] void fail(const std::string& why) const { throw InputError(what_ + ": malformed .npy header: " + why); }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  bool word(const char* w) {
    const std::size_t n = std::strlen(w);
    if (s_.compare(i_, n, w) != 0) return false;
    i_ += n;
    return true;
  }
  std::string quoted() {
    const char q = peek();
    if (q != '\'' && q != '"') fail("expected a quoted string");
    const std::size_t end = s_.find(q, i_ + 1);
    if (end == std::string::npos) fail("unterminated string");
    std::string r = s_.substr(i_ + 1, end - i_ - 1);
    i_ = end + 1;
    return r;
  }
  Shape tuple() {
    expect('(');
    Shape shape;
    while (true) {
      ws();
      if (peek() == ')') { ++i_; return shape; }
      if (peek() < '0' || peek() > '9') fail("shape must be a tuple of non-negative integers");
      std::int64_t d = 0;
      while (peek() >= '0' && peek() <= '9') {
        if (d > (std::numeric_limits<std::int64_t>::max() - 9) / 10) fail("dimension out of range");
        d = 10 * d + (s_[i_++] - '0');
      }
      if (peek() == 'L') ++i_;  // Python 2 long
      shape.push_back(d);
      if (shape.size() > 32) fail("more than 32 dimensions");  // NumPy's own maximum
      ws();
      if (peek() == ',') ++i_;
      else if (peek() != ')') fail("expected ',' or ')' in shape");
    }
  }

  const std::string& s_;
  const std::string& what_;
  std::size_t i_ = 0;
};

// Magic, version, header dict (descr, C order, shape); the element count checked against
// the limit before anything is allocated. The data length is checked by the callers, who
// know the element width.
NpyHeader parse_header(const std::string& b, const std::string& what) {
  if (b.size() < 10 || std::memcmp(b.data(), "\x93NUMPY", 6) != 0)
    throw InputError(what + ": not a .npy file (bad magic)");
  const unsigned major = static_cast<unsigned char>(b[6]);
  std::size_t header_len, offset;
  if (major == 1) {
    header_len = static_cast<unsigned char>(b[8]) | (static_cast<unsigned char>(b[9]) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (b.size() < 12) throw InputError(what + ": truncated .npy header");
    header_len = 0;
    for (int i = 0; i < 4; ++i) header_len |= static_cast<std::size_t>(static_cast<unsigned char>(b[8 + i])) << (8 * i);
    offset = 12;
  } else {
    throw InputError(what + ": unsupported .npy version " + std::to_string(major));
  }
  if (header_len > kMaxHeaderBytes)
    throw InputError(what + ": .npy header of " + std::to_string(header_len) + " bytes (NumPy's limit is 10000)");
  if (b.size() < offset + header_len) throw InputError(what + ": truncated .npy header");
  NpyHeader h;
  HeaderDict(b.substr(offset, header_len), what).parse(h);
  h.count = checked_element_count(h.shape, what);
  h.data_offset = offset + header_len;
  return h;
}

// The data must be exactly what the header's shape and dtype need: fewer bytes is a
// truncated file, more is a header that does not describe the data.
void check_length(const std::string& b, const NpyHeader& h, std::size_t width, const std::string& what) {
  const std::size_t need = static_cast<std::size_t>(h.count) * width, have = b.size() - h.data_offset;
  if (have < need)
    throw InputError(what + ": truncated data (" + std::to_string(have) + " bytes, shape " + shape_string(h.shape) +
                     " needs " + std::to_string(need) + ")");
  if (have > need)
    throw InputError(what + ": " + std::to_string(have - need) + " bytes after the data (shape " + shape_string(h.shape) +
                     " needs " + std::to_string(need) + "): the header does not describe the file");
}

// The bytes per value of a float .npy header's dtype (and the dtype), or InputError.
std::size_t float_width(const NpyHeader& h, const std::string& what, DType& dtype) {
  const std::string& descr = h.descr;
  if (descr == "<f4" || descr == "=f4") { dtype = DType::Float32; return 4; }
  if (descr == "<f8" || descr == "=f8") { dtype = DType::Float64; return 8; }
  if (descr == "<f2" || descr == "=f2") { dtype = DType::Float16; return 2; }
  // NumPy has no bfloat16: an ml_dtypes bfloat16 array is saved as 2-byte void, which names no
  // type (reading it as bfloat16 would guess).
  const std::string hint =
      descr == "<V2" || descr == "|V2"
          ? "; a bfloat16 array (ml_dtypes) is saved as '" + descr +
                "', which does not say its type: save it as float32 (x.astype(numpy.float32) "
                "holds its values exactly) and give bfloat16 as its dtype where the command takes one (" +
                field("dtype") + "; Python's functions take ml_dtypes arrays)"
          : "";
  throw InputError(what + ": unsupported dtype '" + descr + "' (expected little-endian float16/32/64)" + hint);
}

// The head of a .npy that is not a regular file: the magic at once, then the header; the
// total size is the header's plus its shape times the width its descr names ('<f4': 4).
HeadVerdict npy_head(const std::string& b, const std::string& what) {
  const std::size_t n = std::min<std::size_t>(b.size(), 6);
  if (std::memcmp(b.data(), "\x93NUMPY", n) != 0) throw InputError(what + ": not a .npy file (bad magic)");
  if (b.size() < 12) return {true, std::nullopt};
  const std::size_t offset = static_cast<unsigned char>(b[6]) == 1 ? 10 : 12;
  std::size_t header_len = static_cast<unsigned char>(b[8]) | (static_cast<unsigned char>(b[9]) << 8);
  if (offset == 12) header_len |= static_cast<std::size_t>(static_cast<unsigned char>(b[10])) << 16 |
                                  static_cast<std::size_t>(static_cast<unsigned char>(b[11])) << 24;
  if (header_len <= kMaxHeaderBytes && b.size() < offset + header_len) return {true, std::nullopt};
  const NpyHeader h = parse_header(b, what);  // refuses a bad or too long header
  const char w = h.descr.size() == 3 ? h.descr[2] : '0';
  if (w != '1' && w != '2' && w != '4' && w != '8') return {};  // the parse names the dtype
  return {false, h.data_offset + static_cast<std::uint64_t>(h.count) * static_cast<std::uint64_t>(w - '0')};
}

// A zip archive starts with a local file header (or, empty, the end of central directory).
HeadVerdict npz_head(const std::string& b, const std::string& what) {
  const std::size_t n = std::min<std::size_t>(b.size(), 4);
  if (std::memcmp(b.data(), "PK\x03\x04", n) != 0 && std::memcmp(b.data(), "PK\x05\x06", n) != 0)
    throw InputError(what + ": not an .npz archive (not a zip file)");
  return {n < 4, std::nullopt};
}

std::string read_npy_bytes(const std::string& path) {
  return read_input_file(path, ".npy file", [&](const std::string& h) { return npy_head(h, path); });
}

}  // namespace

Tensor parse_npy(const std::string& b, const std::string& what) {
  const NpyHeader h = parse_header(b, what);
  Tensor t;
  t.shape = h.shape;
  const std::size_t width = float_width(h, what, t.dtype);
  check_length(b, h, width, what);
  const std::int64_t n = h.count;
  t.data.resize(static_cast<std::size_t>(n));
  const char* p = b.data() + h.data_offset;
  for (std::int64_t i = 0; i < n; ++i) {
    if (width == 4) { float f; std::memcpy(&f, p + 4 * i, 4); t.data[i] = f; }
    else if (width == 8) { std::memcpy(&t.data[i], p + 8 * i, 8); }
    else { std::uint16_t h; std::memcpy(&h, p + 2 * i, 2); t.data[i] = from_bits(DType::Float16, h); }
  }
  return t;
}

IntArray read_npy_ints(const std::string& path) {
  const std::string b = read_npy_bytes(path);
  const NpyHeader h = parse_header(b, path);
  const std::string& d = h.descr;
  if (d.size() != 3 || (d[0] != '<' && d[0] != '|' && d[0] != '=') || (d[1] != 'i' && d[1] != 'u') ||
      (d[2] != '1' && d[2] != '2' && d[2] != '4' && d[2] != '8'))
    throw InputError(path + ": unsupported dtype '" + d + "' (expected little-endian integers: int8/16/32/64, uint8/16/32)");
  const std::size_t width = static_cast<std::size_t>(d[2] - '0');
  const bool is_signed = d[1] == 'i';
  if (!is_signed && width == 8) throw InputError(path + ": uint64 is not supported");
  check_length(b, h, width, path);
  IntArray a{h.shape, std::vector<std::int64_t>(static_cast<std::size_t>(h.count))};
  const char* p = b.data() + h.data_offset;
  for (std::size_t i = 0; i < a.values.size(); ++i) {
    std::uint64_t u = 0;
    std::memcpy(&u, p + width * i, width);  // little-endian host
    if (is_signed && width < 8 && (u >> (8 * width - 1)) & 1) u |= ~std::uint64_t{0} << (8 * width);
    a.values[i] = static_cast<std::int64_t>(u);
  }
  return a;
}

void write_npy_ints(const std::string& path, const Shape& shape, const std::vector<std::int64_t>& values, int width) {
  if (width != 1 && width != 4) throw std::invalid_argument("write_npy_ints: width 1 or 4");
  Tensor t;  // the header through serialize_npy's shape formatting, then the integer data
  t.shape = shape;
  std::string bytes = serialize_npy(t);
  const std::string descr = width == 1 ? "|i1" : "<i4";
  bytes.replace(bytes.find("<f4"), 3, descr);
  for (const std::int64_t v : values) {
    if (width == 1) {
      const std::int8_t x = static_cast<std::int8_t>(v);
      bytes.append(reinterpret_cast<const char*>(&x), 1);
    } else {
      const std::int32_t x = static_cast<std::int32_t>(v);
      bytes.append(reinterpret_cast<const char*>(&x), 4);
    }
  }
  write_file_atomically(path, bytes);
}

Tensor read_npy(const std::string& path) { return parse_npy(read_npy_bytes(path), path); }

std::string serialize_npy(const Tensor& t) {
  std::string shape = "(";
  for (auto d : t.shape) shape += std::to_string(d) + ", ";
  if (t.shape.size() > 1) shape.resize(shape.size() - 2);
  else if (t.shape.size() == 1) shape.resize(shape.size() - 1);
  shape += ")";
  std::string header = "{'descr': '" + dtype_descr(t.dtype) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  for (double v : t.data) {
    if (t.dtype == DType::Float64) out.append(reinterpret_cast<const char*>(&v), 8);
    else if (t.dtype == DType::Float16) {
      const std::uint16_t h = to_bits(DType::Float16, v);
      out.append(reinterpret_cast<const char*>(&h), 2);
    } else {
      const float f = static_cast<float>(v);
      out.append(reinterpret_cast<const char*>(&f), 4);
    }
  }
  return out;
}

void write_npy(const std::string& path, const Tensor& t) { write_file_atomically(path, serialize_npy(t)); }

namespace {

// The bytes of member `i`, read in chunks: memory grows with the bytes that are really
// there, never with the size the archive's directory claims (a 188-byte archive may claim
// 4 GB). The .npy header is checked as soon as it has arrived, so a member whose shape is
// over the element limit is refused after its first chunk, whatever it decompresses to.
std::string read_member(zip_t* z, zip_uint64_t i, const zip_stat_t& st, const std::string& what, std::int64_t max_values) {
  zip_file_t* f = zip_fopen_index(z, i, 0);
  if (!f) throw InputError(what + ": cannot read member (" + zip_strerror(z) + ")");
  std::string bytes;
  bool header_checked = false;
  char buf[1 << 16];
  try {
    while (true) {
      const zip_int64_t got = zip_fread(f, buf, sizeof buf);
      if (got < 0) throw InputError(what + ": cannot read member (" + zip_file_strerror(f) + ")");
      if (got == 0) break;
      bytes.append(buf, static_cast<std::size_t>(got));
      if (bytes.size() > st.size) throw InputError(what + ": member longer than the archive says (" + std::to_string(st.size) + " bytes)");
      if (!header_checked && bytes.size() >= 12) {
        const std::size_t len = bytes[6] == 1 ? (static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9]) << 8) + 10
                                              : kMaxHeaderBytes + 12;
        if (bytes.size() >= std::min<std::size_t>(len, st.size)) {
          const NpyHeader h = parse_header(bytes, what);  // magic, dict, shape over the limit: refused here
          if (max_values > 0 && h.count > max_values)
            throw InputError(fmt::format("{}: shape {} has {} values, more than the {} this command can use", what,
                                         shape_string(h.shape), h.count, max_values));
          // The member must be the header and exactly its data: more is refused before it is
          // read (a few KB of deflated zeros can follow a two-value header as 400 MB).
          DType dtype;
          const std::uint64_t need = h.data_offset + static_cast<std::uint64_t>(h.count) * float_width(h, what, dtype);
          if (st.size != need)
            throw InputError(fmt::format("{}: {} bytes, but its header (shape {}) describes {}", what, st.size,
                                         shape_string(h.shape), need));
          header_checked = true;
        }
      }
    }
  } catch (...) {
    zip_fclose(f);
    throw;
  }
  zip_fclose(f);
  if (bytes.size() != st.size) throw InputError(what + ": truncated member (" + std::to_string(bytes.size()) + " of " + std::to_string(st.size) + " bytes)");
  return bytes;
}

// Every member "<key>.npy" of an open archive; `z` is discarded here whatever happens.
// With `expected` non-empty, a key outside it is refused before any member is read.
std::map<std::string, Tensor> npz_members(zip_t* z, const std::string& what, const std::vector<std::string>& expected,
                                          std::int64_t max_values) {
  std::map<std::string, Tensor> out;
  try {
    const zip_int64_t n = zip_get_num_entries(z, 0);
    std::vector<std::pair<zip_uint64_t, zip_stat_t>> members;
    for (zip_int64_t i = 0; i < n; ++i) {
      zip_stat_t st;
      zip_stat_init(&st);
      if (zip_stat_index(z, static_cast<zip_uint64_t>(i), 0, &st) != 0 || !(st.valid & ZIP_STAT_NAME) ||
          !(st.valid & ZIP_STAT_SIZE))
        throw InputError(what + ": corrupt .npz entry " + std::to_string(i));
      // NumPy's key of a member: its name without ".npy" (np.load reads "gamma" and
      // "gamma.npy" alike as the array 'gamma'), so no member is silently skipped and two
      // members for one key are refused below.
      const std::string name = st.name;
      const bool suffixed = name.size() >= 4 && name.substr(name.size() - 4) == ".npy";
      const std::string key = suffixed ? name.substr(0, name.size() - 4) : name;
      for (const auto& m : members) {
        const std::string other = m.second.name;
        if (other == key || other == key + ".npy") throw InputError(what + ": key '" + key + "' appears twice");
      }
      if (!expected.empty() && std::find(expected.begin(), expected.end(), key) == expected.end()) {
        std::string list;
        for (const std::string& k : expected) list += (list.empty() ? "" : ", ") + k;
        throw InputError(what + ": unexpected key '" + key + "' (expected " + list + ")");
      }
      if (st.size > max_input_bytes())
        throw InputError(what + "[" + key + "]: " + std::to_string(st.size) + " bytes, over the limit of " +
                         std::to_string(max_input_bytes()) + " (raise it with " + field("max_elements") + " or FOLDCHECK_MAX_ELEMENTS)");
      members.emplace_back(static_cast<zip_uint64_t>(i), st);
    }
    for (const auto& [i, st] : members) {
      const std::string name = st.name;
      const std::string key = name.size() >= 4 && name.substr(name.size() - 4) == ".npy" ? name.substr(0, name.size() - 4) : name;
      out[key] = parse_npy(read_member(z, i, st, what + "[" + key + "]", max_values), what + "[" + key + "]");
    }
  } catch (...) {
    zip_discard(z);
    throw;
  }
  zip_discard(z);
  return out;
}

[[noreturn]] void not_a_zip(const std::string& what, zip_error_t* ze) {
  const std::string msg = zip_error_strerror(ze);
  zip_error_fini(ze);
  throw InputError(what + ": not a readable .npz archive (" + msg + ")");
}

}  // namespace

std::map<std::string, Tensor> parse_npz(const std::string& bytes, const std::string& what,
                                        const std::vector<std::string>& expected, std::int64_t max_values) {
  zip_error_t ze;
  zip_error_init(&ze);
  zip_source_t* src = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &ze);
  if (!src) not_a_zip(what, &ze);
  zip_t* z = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &ze);
  if (!z) {
    zip_source_free(src);
    not_a_zip(what, &ze);
  }
  zip_error_fini(&ze);
  return npz_members(z, what, expected, max_values);
}

std::map<std::string, Tensor> read_npz(const std::string& path, const std::vector<std::string>& expected,
                                       std::int64_t max_values) {
  return parse_npz(read_input_file(path, ".npz archive", [&](const std::string& h) { return npz_head(h, path); }), path,
                   expected, max_values);
}

void write_npz(const std::string& path, const std::map<std::string, Tensor>& arrays) {
  int err = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  if (!z) throw InputError(path + ": cannot create .npz");
  std::vector<std::string> keep;
  keep.reserve(arrays.size());
  for (const auto& [k, t] : arrays) {
    keep.push_back(serialize_npy(t));
    zip_source_t* src = zip_source_buffer(z, keep.back().data(), keep.back().size(), 0);
    if (!src || zip_file_add(z, (k + ".npy").c_str(), src, ZIP_FL_OVERWRITE) < 0) {
      if (src) zip_source_free(src);
      zip_discard(z);
      throw InputError(path + ": cannot add " + k);
    }
  }
  if (zip_close(z) != 0) {
    zip_discard(z);
    throw InputError(path + ": cannot write .npz");
  }
}

}  // namespace foldcheck
