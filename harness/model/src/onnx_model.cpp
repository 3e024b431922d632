// Model::load: an ONNX file (protobuf, through Debian's libonnx) into the model IR.
#include <algorithm>
#include <bit>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <sys/stat.h>

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/io/contained_file.hpp"
#include "foldcheck/io/input_file.hpp"
#include "foldcheck/io/limits.hpp"
#include "foldcheck/io/output_file.hpp"
#include "foldcheck/model/model.hpp"
#include "op_registry.hpp"

namespace foldcheck {
namespace {

namespace fs = std::filesystem;
using onnx::TensorProto;


std::optional<DType> floating_dtype(int t) {
  switch (t) {
    case TensorProto::FLOAT: return DType::Float32;
    case TensorProto::DOUBLE: return DType::Float64;
    case TensorProto::FLOAT16: return DType::Float16;
    case TensorProto::BFLOAT16: return DType::BFloat16;
    default: return std::nullopt;
  }
}
bool integer_type(int t) {
  return t == TensorProto::INT64 || t == TensorProto::INT32 || t == TensorProto::INT16 || t == TensorProto::INT8 ||
         t == TensorProto::UINT8 || t == TensorProto::UINT16 || t == TensorProto::BOOL;
}
std::size_t element_bytes(int t) {
  switch (t) {
    case TensorProto::DOUBLE: case TensorProto::INT64: return 8;
    case TensorProto::FLOAT: case TensorProto::INT32: return 4;
    case TensorProto::FLOAT16: case TensorProto::BFLOAT16: case TensorProto::INT16: case TensorProto::UINT16: return 2;
    default: return 1;
  }
}

// A non-negative decimal integer from an external_data entry, without exceptions.
std::int64_t external_field(const TensorProto& t, const std::string& key, const std::string& v) {
  std::int64_t x = -1;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || end != v.data() + v.size() || x < 0)
    throw InputError(fmt::format("initializer {}: external data {} '{}' is not a non-negative integer", t.name(), key, v));
  return x;
}

// Refuses an external data file whose real path (symlinks resolved) is not inside the
// model's real directory: a symlinked folder or file beside the model must not make
// foldcheck read any file on the machine as weights. Checked before the file is opened,
// so an offset error cannot disclose the size of a file outside.
void check_contained(const TensorProto& t, const std::string& location, const fs::path& dir, const fs::path& p) {
  std::error_code ec;
  const fs::path real_dir = fs::canonical(dir.empty() ? fs::path(".") : dir, ec);
  const fs::path real = ec ? fs::path() : fs::canonical(p, ec);
  bool inside = !ec;
  if (inside) {
    const auto [d, r] = std::mismatch(real_dir.begin(), real_dir.end(), real.begin(), real.end());
    inside = d == real_dir.end() && r != real.end();
  }
  if (!inside)
    throw InputError(fmt::format("initializer {}: external data location '{}' resolves (through a symlink) outside the "
                                 "model's directory",
                                 t.name(), location));
}

// The tensor's bytes in little-endian order, from raw_data or an external file (offset,
// length) beside the model; empty when the values sit in the typed fields. `expected` is
// the byte count the dims call for; an external range of any other length is refused
// before it is read. The location must be a relative path inside the model's directory
// (the ONNX external-data rules): a model file must not make foldcheck read /etc/passwd.
std::string raw_bytes(const TensorProto& t, const fs::path& dir, std::size_t expected) {
  if (t.data_location() != TensorProto::EXTERNAL) return t.raw_data();
  std::string location;
  std::int64_t offset = 0, length = -1;
  for (const auto& kv : t.external_data()) {
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") offset = external_field(t, "offset", kv.value());
    else if (kv.key() == "length") length = external_field(t, "length", kv.value());
  }
  const fs::path rel(location);
  bool escapes = location.empty() || rel.is_absolute() || location.find('\0') != std::string::npos;
  for (const auto& part : rel) escapes = escapes || part == "..";
  if (escapes)
    throw InputError(fmt::format("initializer {}: external data location '{}' must be a relative path inside the "
                                 "model's directory",
                                 t.name(), location));
  const fs::path p = dir / rel;
  std::error_code ec;
  const bool exists = fs::exists(p, ec);
  if (exists) check_contained(t, location, dir, p);
  if (!fs::is_regular_file(p, ec))
    throw InputError(fmt::format("initializer {}: cannot read external data file {} ({})", t.name(), p.string(),
                                 exists ? "not a regular file" : "No such file or directory"));
  // Opened under the one rule of files another program wrote (contained_file.hpp): an
  // engine's folded model names its data file, and a FIFO swapped in after the checks above
  // must not block the read. Each range is sized by the tensor's checked dims.
  const ContainedFile in = open_contained((dir.empty() ? fs::path(".") : dir).string(), "the model's directory",
                                          p.string(), "external data file", std::numeric_limits<std::uint64_t>::max());
  // An input like the model itself: no output of this run may replace it (output_file.hpp).
  struct stat st {};
  if (::fstat(in.fd(), &st) == 0)
    note_input_file(static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino));
  const std::int64_t size = static_cast<std::int64_t>(in.size());
  if (length < 0) length = offset <= size ? size - offset : 0;
  if (offset > size || length > size - offset)
    throw InputError(fmt::format("initializer {}: external data {} bytes at {} outside {} ({} bytes)", t.name(), length,
                                 offset, p.string(), size));
  if (static_cast<std::uint64_t>(length) != expected)
    throw InputError(fmt::format("initializer {}: {} bytes of external data for {} bytes of elements", t.name(), length,
                                 expected));
  std::string bytes = read_range(in, static_cast<std::uint64_t>(offset), static_cast<std::uint64_t>(length), p.string(),
                                 "external data file");
  if (bytes.size() != static_cast<std::size_t>(length))
    throw InputError(fmt::format("initializer {}: cannot read external data file {}", t.name(), p.string()));
  return bytes;
}

Shape dims_of(const TensorProto& t) { return Shape(t.dims().begin(), t.dims().end()); }

// The element count of t's dims, refused if negative, overflowing or over the limit.
std::size_t count_of(const TensorProto& t) {
  return static_cast<std::size_t>(checked_element_count(dims_of(t), "initializer " + t.name()));
}

// The values a tensor holds (raw bytes, or the typed field its type uses) against the
// element count n its dims claim, refused on any difference BEFORE anything of n elements
// is allocated: a few hundred bytes claiming 2^28 values must not cost 2 GB.
void check_claimed_size(const TensorProto& t, const std::string& raw, std::size_t n, std::size_t eb,
                        std::optional<DType> dt) {
  if (!raw.empty()) {  // (dims of 0 elements with 36 typed values must not pass as empty)
    if (raw.size() != n * eb)
      throw InputError(fmt::format("initializer {}: {} bytes of data for {} elements of {} bytes", t.name(), raw.size(), n, eb));
    return;
  }
  const bool i64 = t.data_type() == TensorProto::INT64;
  const std::size_t have = dt == DType::Float32   ? static_cast<std::size_t>(t.float_data_size())
                           : dt == DType::Float64 ? static_cast<std::size_t>(t.double_data_size())
                           : i64                  ? static_cast<std::size_t>(t.int64_data_size())
                                                  : static_cast<std::size_t>(t.int32_data_size());
  if (have != n) throw InputError(fmt::format("initializer {}: {} values for {} elements", t.name(), have, n));
}

// A floating tensor, exactly.
Tensor floating_tensor(const TensorProto& t, DType dt, const fs::path& dir) {
  Tensor out;
  out.dtype = dt;
  out.shape = dims_of(t);
  const std::size_t n = count_of(t);
  const std::size_t eb = element_bytes(t.data_type());
  const std::string raw = raw_bytes(t, dir, n * eb);
  check_claimed_size(t, raw, n, eb, dt);
  out.data.resize(n);
  if (!raw.empty() || n == 0) {
    for (std::size_t i = 0; i < n; ++i) {
      const char* p = raw.data() + i * eb;
      if (dt == DType::Float32) { float f; std::memcpy(&f, p, 4); out.data[i] = f; }
      else if (dt == DType::Float64) { std::memcpy(&out.data[i], p, 8); }
      else { std::uint16_t h; std::memcpy(&h, p, 2); out.data[i] = from_bits(dt, h); }
    }
    return out;
  }
  // Typed fields: float_data, double_data, or int32_data holding 16-bit patterns.
  for (std::size_t i = 0; i < n; ++i) {
    const int k = static_cast<int>(i);
    if (dt == DType::Float32) out.data[i] = t.float_data(k);
    else if (dt == DType::Float64) out.data[i] = t.double_data(k);
    else {
      const auto h = static_cast<std::uint16_t>(t.int32_data(k));
      out.data[i] = from_bits(dt, h);
    }
  }
  return out;
}

std::vector<std::int64_t> integer_values(const TensorProto& t, const fs::path& dir) {
  const std::size_t n = count_of(t);
  const std::size_t eb = element_bytes(t.data_type());
  const std::string raw = raw_bytes(t, dir, n * eb);
  check_claimed_size(t, raw, n, eb, std::nullopt);
  std::vector<std::int64_t> v(n);
  if (!raw.empty()) {
    for (std::size_t i = 0; i < n; ++i) {
      const char* p = raw.data() + i * eb;
      switch (t.data_type()) {
        case TensorProto::INT64: std::memcpy(&v[i], p, 8); break;
        case TensorProto::INT32: { std::int32_t x; std::memcpy(&x, p, 4); v[i] = x; break; }
        case TensorProto::INT16: { std::int16_t x; std::memcpy(&x, p, 2); v[i] = x; break; }
        case TensorProto::UINT16: { std::uint16_t x; std::memcpy(&x, p, 2); v[i] = x; break; }
        case TensorProto::INT8: v[i] = static_cast<std::int8_t>(*p); break;
        default: v[i] = static_cast<std::uint8_t>(*p); break;
      }
    }
    return v;
  }
  const bool i64 = t.data_type() == TensorProto::INT64;
  for (std::size_t i = 0; i < n; ++i) v[i] = i64 ? t.int64_data(static_cast<int>(i)) : t.int32_data(static_cast<int>(i));
  return v;
}

Attribute attribute_of(const onnx::AttributeProto& a, const fs::path& dir) {
  Attribute r;
  using A = onnx::AttributeProto;
  switch (a.type()) {
    case A::INT: r.kind = Attribute::Kind::Int; r.i = a.i(); break;
    case A::FLOAT: r.kind = Attribute::Kind::Float; r.f = a.f(); break;
    case A::STRING: r.kind = Attribute::Kind::String; r.s = a.s(); break;
    case A::INTS: r.kind = Attribute::Kind::Ints; r.ints.assign(a.ints().begin(), a.ints().end()); break;
    case A::FLOATS: r.kind = Attribute::Kind::Floats; r.floats.assign(a.floats().begin(), a.floats().end()); break;
    case A::TENSOR: {
      r.kind = Attribute::Kind::Tensor;
      r.elem_type = TensorProto::DataType_Name(static_cast<TensorProto::DataType>(a.t().data_type()));
      if (const auto dt = floating_dtype(a.t().data_type())) r.t = floating_tensor(a.t(), *dt, dir);
      else if (integer_type(a.t().data_type())) {

        r.t.shape = dims_of(a.t());
        for (const std::int64_t x : integer_values(a.t(), dir)) r.t.data.push_back(static_cast<double>(x));
        r.t.dtype = DType::Float64;  // integers held exactly as doubles (|x| < 2^53)
      }
      break;
    }
    default: break;
  }
  return r;
}

ValueInfo value_info(const onnx::ValueInfoProto& v) {
  ValueInfo r;
  r.name = v.name();
  if (v.type().has_tensor_type()) {
    const auto& tt = v.type().tensor_type();
    r.dtype = floating_dtype(tt.elem_type());
    if (tt.elem_type() != 0) r.elem_type = TensorProto::DataType_Name(static_cast<TensorProto::DataType>(tt.elem_type()));
    for (const auto& d : tt.shape().dim()) r.shape.push_back(d.has_dim_value() ? d.dim_value() : -1);
  }
  return r;
}

// The default-domain opset decides which form of an op's attributes and inputs is meant
// (Clip's min at 11, Squeeze's axes at 13): without exactly one, the model has no meaning.
void read_opset(const onnx::ModelProto& mp, const std::string& path, Model& m) {
  int default_imports = 0;
  for (const auto& os : mp.opset_import())
    if (os.domain().empty() || os.domain() == "ai.onnx") {
      m.opset = os.version();
      ++default_imports;
    }
  if (default_imports != 1 || m.opset < 1)
    throw InputError(fmt::format("{}: the model must import the default ONNX domain exactly once, at a version >= 1 "
                                 "(it imports it {} times{})",
                                 path, default_imports, default_imports ? fmt::format(", version {}", m.opset) : ""));
}

// Floating initializers as exact tensors, integer ones as ints, others kept by type only.
void read_initializers(const onnx::GraphProto& g, const fs::path& dir, Model& m) {
  for (const auto& t : g.initializer()) {
    if (m.initializers.count(t.name()) || m.int_inits.count(t.name()) || m.unread_inits.count(t.name()))
      throw InputError(fmt::format("initializer '{}' is defined twice", t.name()));
    if (const auto dt = floating_dtype(t.data_type())) m.initializers[t.name()] = floating_tensor(t, *dt, dir);
    else if (integer_type(t.data_type())) {
      m.int_inits[t.name()] = integer_values(t, dir);
      m.int_init_shapes[t.name()] = dims_of(t);
      m.int_init_type[t.name()] = TensorProto::DataType_Name(static_cast<TensorProto::DataType>(t.data_type()));
    } else {
      m.unread_inits[t.name()] = TensorProto::DataType_IsValid(t.data_type())
                                     ? TensorProto::DataType_Name(static_cast<TensorProto::DataType>(t.data_type()))
                                     : fmt::format("{}", t.data_type());
    }
  }
}

// The nodes in file order; an attribute given twice, or of another kind than the ONNX spec
// makes it (expected_attribute_kind), is refused.
void read_nodes(const onnx::GraphProto& g, const fs::path& dir, Model& m) {
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& np = g.node(i);
    ModelNode n;
    n.op = np.op_type();
    n.domain = np.domain();
    n.name = np.name();
    n.inputs.assign(np.input().begin(), np.input().end());
    n.outputs.assign(np.output().begin(), np.output().end());
    for (const auto& a : np.attribute()) {
      const std::string at = fmt::format("{} at node {}{}: attribute '{}'", n.op, i, n.name.empty() ? "" : " (" + n.name + ")", a.name());
      if (!n.attributes.emplace(a.name(), attribute_of(a, dir)).second) throw InputError(at + " is given twice");
      const Attribute::Kind k = n.attributes[a.name()].kind;
      if (n.domain.empty() || n.domain == "ai.onnx")
        if (const auto want = expected_attribute_kind(n.op, a.name()); want && *want != k)
          throw InputError(fmt::format("{} is {}; the ONNX spec makes it {}", at, kind_name(k), kind_name(*want)));
    }
    m.nodes.push_back(std::move(n));
  }
}

// The inputs and outputs every node foldcheck looks into must have (the ONNX operator
// specs' minimum counts, the op registry's arity), so that the pattern finder and the
// runner can index them.
void check_min_arity(const Model& m, const std::string& path) {
  for (std::size_t i = 0; i < m.nodes.size(); ++i) {
    const ModelNode& n = m.nodes[i];
    const ops::OpEntry* e = ops::find_op(n.op);
    if (!e || !(n.domain.empty() || n.domain == "ai.onnx")) continue;
    const std::size_t min_in = e->arity.min_inputs, min_out = e->arity.min_outputs;
    std::size_t present = 0;  // required inputs may not be omitted ("")
    for (std::size_t k = 0; k < n.inputs.size() && k < min_in; ++k) present += !n.inputs[k].empty();
    if (present < min_in || n.outputs.size() < min_out || (!n.outputs.empty() && n.outputs[0].empty()))
      throw InputError(fmt::format("{}: {} at node {}{} has {} inputs and {} outputs; the op needs at least {} and {}", path,
                                   n.op, i, n.name.empty() ? "" : " (" + n.name + ")", n.inputs.size(), n.outputs.size(),
                                   min_in, min_out));
  }
}

// Exporters deduplicate equal tensors by an Identity of one initializer (PyTorch does for
// zero-initialised biases): such values are initializers too, under their own name.
// They are aliases, not copies: 300 Identities of one large initializer cost nothing.
void find_aliases(Model& m) {
  for (const ModelNode& n : m.nodes) {
    if (n.op != "Identity" || n.inputs.size() != 1 || n.outputs.size() != 1) continue;
    const std::string &from = n.inputs[0], &to = n.outputs[0];
    if (m.initializers.count(to) || m.int_inits.count(to) || m.aliases.count(to) || from == to) continue;
    const auto root = m.aliases.find(from);
    const std::string& target = root == m.aliases.end() ? from : root->second;
    if (m.initializers.count(target) || m.int_inits.count(target)) m.aliases[to] = target;
  }
}

}  // namespace

Model Model::load(const std::string& path) {
  return Model::parse(read_input_file(path, "ONNX model", [&](const std::string& h) { return onnx_head(h, path); }), path);
}

Model Model::parse(const std::string& bytes, const std::string& path) {
  onnx::ModelProto mp;
  if (!mp.ParseFromString(bytes)) throw InputError(path + ": not an ONNX model (protobuf parse failed)");
  const fs::path dir = fs::path(path).parent_path();
  Model m;
  m.path = path;
  m.producer = mp.producer_name();
  read_opset(mp, path, m);
  const onnx::GraphProto& g = mp.graph();
  try {  // initializer and attribute messages name the model file
    read_initializers(g, dir, m);
    read_nodes(g, dir, m);
  } catch (const InputError& e) {
    throw InputError(path + ": " + e.what());
  }
  for (const auto& v : g.input())
    if (!m.initializers.count(v.name()) && !m.int_inits.count(v.name())) m.inputs.push_back(value_info(v));
  for (const auto& v : g.output()) m.outputs.push_back(value_info(v));
  check_min_arity(m, path);
  find_aliases(m);
  check_graph(m);
  return m;
}

}  // namespace foldcheck
