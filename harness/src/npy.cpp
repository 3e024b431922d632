#include "foldcheck/npy.hpp"

#include <zip.h>

#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include "foldcheck/errors.hpp"

namespace foldcheck {
namespace {

constexpr std::int64_t kMaxElements = std::int64_t(1) << 32;  // refuse absurd headers before allocating

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

// Magic, version, header dict (descr, C order, shape); the element count checked against
// the limit. The data length is checked by the callers, who know the element width.
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
  if (b.size() < offset + header_len) throw InputError(what + ": truncated .npy header");
  const std::string header = b.substr(offset, header_len);
  std::smatch m;
  if (!std::regex_search(header, m, std::regex(R"('descr'\s*:\s*'([^']*)')")))
    throw InputError(what + ": .npy header has no 'descr'");
  const std::string descr = m[1];
  if (std::regex_search(header, m, std::regex(R"('fortran_order'\s*:\s*(True|False))")) && m[1] == "True")
    throw InputError(what + ": Fortran-ordered arrays are not supported (save with C order)");
  if (!std::regex_search(header, m, std::regex(R"('shape'\s*:\s*\(([^)]*)\))")))
    throw InputError(what + ": .npy header has no 'shape'");
  NpyHeader h;
  h.descr = descr;
  Tensor t;
  const std::string dims = m[1];
  std::stringstream ss(dims);
  std::string tok;
  while (std::getline(ss, tok, ',')) {
    tok.erase(0, tok.find_first_not_of(" \t"));
    tok.erase(tok.find_last_not_of(" \tL") + 1);
    if (tok.empty()) continue;
    try {
      std::size_t used = 0;
      const long long d = std::stoll(tok, &used);
      if (used != tok.size() || d < 0) throw std::invalid_argument(tok);
      t.shape.push_back(d);
    } catch (const std::exception&) {
      throw InputError(what + ": malformed shape '(" + dims + ")' in .npy header");
    }
  }
  h.shape = t.shape;
  try {
    h.count = element_count(t.shape);
  } catch (const std::exception&) {
    throw InputError(what + ": shape " + shape_string(t.shape) + " overflows");
  }
  if (h.count > kMaxElements) throw InputError(what + ": " + std::to_string(h.count) + " elements exceeds the limit of 2^32");
  h.data_offset = offset + header_len;
  return h;
}

void check_length(const std::string& b, const NpyHeader& h, std::size_t width, const std::string& what) {
  const std::size_t need = static_cast<std::size_t>(h.count) * width;
  if (b.size() - h.data_offset < need)
    throw InputError(what + ": truncated data (" + std::to_string(b.size() - h.data_offset) + " bytes, shape " +
                     shape_string(h.shape) + " needs " + std::to_string(need) + ")");
}

}  // namespace

Tensor parse_npy(const std::string& b, const std::string& what) {
  const NpyHeader h = parse_header(b, what);
  const std::string& descr = h.descr;
  Tensor t;
  t.shape = h.shape;
  std::size_t width;
  if (descr == "<f4" || descr == "=f4") { t.dtype = DType::Float32; width = 4; }
  else if (descr == "<f8" || descr == "=f8") { t.dtype = DType::Float64; width = 8; }
  else if (descr == "<f2" || descr == "=f2") { t.dtype = DType::Float16; width = 2; }
  else throw InputError(what + ": unsupported dtype '" + descr + "' (expected little-endian float16/32/64)");
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
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open (" + std::strerror(errno) + ")");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string b = ss.str();
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
  std::ofstream out(path, std::ios::binary);
  if (!out) throw InputError(path + ": cannot write");
  out << bytes;
  if (!out) throw InputError(path + ": write failed");
}

Tensor read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open (" + std::strerror(errno) + ")");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_npy(ss.str(), path);
}

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

void write_npy(const std::string& path, const Tensor& t) {
  std::ofstream out(path, std::ios::binary);
  const std::string b = serialize_npy(t);
  out.write(b.data(), static_cast<std::streamsize>(b.size()));
  if (!out) throw InputError(path + ": cannot write");
}

std::map<std::string, Tensor> read_npz(const std::string& path) {
  int err = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_RDONLY, &err);
  if (!z) {
    zip_error_t ze;
    zip_error_init_with_code(&ze, err);
    const std::string msg = zip_error_strerror(&ze);
    zip_error_fini(&ze);
    throw InputError(path + ": cannot open as .npz (" + msg + ")");
  }
  std::map<std::string, Tensor> out;
  try {
    const zip_int64_t n = zip_get_num_entries(z, 0);
    for (zip_int64_t i = 0; i < n; ++i) {
      zip_stat_t st;
      if (zip_stat_index(z, i, 0, &st) != 0) throw InputError(path + ": corrupt .npz entry");
      std::string name = st.name;
      if (name.size() < 4 || name.substr(name.size() - 4) != ".npy") continue;
      if (st.size > (std::uint64_t(1) << 34)) throw InputError(path + ": member " + name + " is too large");
      zip_file_t* f = zip_fopen_index(z, i, 0);
      if (!f) throw InputError(path + ": cannot read member " + name);
      std::string bytes(static_cast<std::size_t>(st.size), '\0');
      const zip_int64_t got = zip_fread(f, bytes.data(), st.size);
      zip_fclose(f);
      if (got < 0 || static_cast<std::uint64_t>(got) != st.size) throw InputError(path + ": truncated member " + name);
      const std::string key = name.substr(0, name.size() - 4);
      out[key] = parse_npy(bytes, path + "[" + key + "]");
    }
  } catch (...) {
    zip_discard(z);
    throw;
  }
  zip_discard(z);
  return out;
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
