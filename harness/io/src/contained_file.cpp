// The one rule for files another program wrote for foldcheck (contained_file.hpp).
#include "foldcheck/io/contained_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/io/input_file.hpp"

namespace foldcheck {
namespace {

namespace fs = std::filesystem;

// What a file that is not regular is, for the message.
const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a file";
}

// Whether `real` lies strictly below `dir` (both with every link resolved).
bool below(const fs::path& dir, const fs::path& real) {
  const auto [d, r] = std::mismatch(dir.begin(), dir.end(), real.begin(), real.end());
  return d == dir.end() && r != real.end();
}

// The resolved path of `path`, refused when it is missing or leads outside `dir`.
fs::path resolved_inside(const std::string& dir, const std::string& dir_name, const std::string& path,
                         const std::string& kind) {
  if (path.find('\0') != std::string::npos)
    throw InputError(fmt::format("{}: the path of a {} holds a NUL byte", path, kind));
  struct stat lst {};
  if (::lstat(path.c_str(), &lst) != 0)
    throw InputError(fmt::format("{}: cannot read {} ({})", path, kind, std::strerror(errno)));
  std::error_code ec;
  const fs::path real_dir = fs::canonical(dir, ec);
  if (ec) throw InputError(fmt::format("{}: cannot read {} ({}: {})", path, kind, dir, ec.message()));
  fs::path real = fs::canonical(path, ec);  // a dangling link fails here (not const: returned by move)
  if (!ec && real == real_dir)              // "." or "sub/..": the directory itself, not a file in it
    throw InputError(
        fmt::format("{}: is {} itself, a directory: the {} must be a regular file inside it", path, dir_name, kind));
  if (ec || !below(real_dir, real))
    throw InputError(fmt::format("{}: leads outside {} (a link?): not read", path, dir_name));
  return real;
}

// A directory foldcheck made (its canonical path then) that is no longer there as made: some
// component of its path is a link now. Empty when it is the directory made (or is missing:
// the read of a file in it then says so).
std::string replaced_by(const std::string& dir) {
  std::error_code ec;
  const fs::path real = fs::canonical(dir, ec);
  fs::path made = fs::path(dir).lexically_normal();
  if (!made.has_filename()) made = made.parent_path();  // "dir/"
  if (ec || real == made) return {};
  return real.string();
}

// The first rule of read_contained (contained_file.hpp): `dir` is still the directory made.
void check_made_dir(const std::string& dir, const std::string& dir_name) {
  if (const std::string real = replaced_by(dir); !real.empty())
    throw InputError(
        fmt::format("{}: {} is no longer the directory foldcheck made: it leads to {} now (replaced by a "
                    "link, or a directory above it was): nothing in it is read",
                    dir, dir_name, real));
}

}  // namespace

ContainedFile::~ContainedFile() {
  if (fd_ >= 0) ::close(fd_);
}

ContainedFile::ContainedFile(ContainedFile&& o) noexcept : fd_(o.fd_), size_(o.size_) { o.fd_ = -1; }

ContainedFile open_contained(const std::string& dir, const std::string& dir_name, const std::string& path,
                             const std::string& kind, std::uint64_t limit) {
  const fs::path real = resolved_inside(dir, dir_name, path, kind);
  struct stat st {};
  if (::lstat(real.c_str(), &st) != 0)
    throw InputError(fmt::format("{}: cannot read {} ({})", path, kind, std::strerror(errno)));
  auto not_regular = [&](mode_t m) {
    return InputError(fmt::format("{}: not a regular file ({}): the {} must be a regular file inside {}", path,
                                  kind_of(m), kind, dir_name));
  };
  if (!S_ISREG(st.st_mode)) throw not_regular(st.st_mode);
  ContainedFile f(::open(real.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY), 0);
  if (f.fd() < 0) throw InputError(fmt::format("{}: cannot read {} ({})", path, kind, std::strerror(errno)));
  struct stat fst {};
  if (::fstat(f.fd(), &fst) != 0)
    throw InputError(fmt::format("{}: cannot read {} ({})", path, kind, std::strerror(errno)));
  if (!S_ISREG(fst.st_mode) || fst.st_ino != st.st_ino || fst.st_dev != st.st_dev) throw not_regular(fst.st_mode);
  f.size_ = static_cast<std::uint64_t>(fst.st_size);
  if (f.size_ > limit)
    throw InputError(fmt::format(fmt::runtime("{}: {} bytes, over the limit of {} bytes for a {} (raise it with " +
                                              field("max_elements") + " or FOLDCHECK_MAX_ELEMENTS)"),
                                 path, f.size_, limit, kind));
  return f;
}

std::string read_range(const ContainedFile& f, std::uint64_t offset, std::uint64_t length, const std::string& path,
                       const std::string& kind) {
  std::string bytes(static_cast<std::size_t>(length), '\0');
  std::size_t have = 0;
  while (have < bytes.size()) {  // a file that shrank meanwhile ends early: the caller's parser says so
    const ssize_t got = ::pread(f.fd(), bytes.data() + have, bytes.size() - have, static_cast<off_t>(offset + have));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw InputError(fmt::format("{}: cannot read {} ({})", path, kind, std::strerror(errno)));
    if (got == 0) break;
    have += static_cast<std::size_t>(got);
  }
  bytes.resize(have);
  return bytes;
}

std::string read_contained(const std::string& dir, const std::string& dir_name, const std::string& path,
                           const std::string& kind) {
  check_made_dir(dir, dir_name);
  const ContainedFile f = open_contained(dir, dir_name, path, kind, max_input_bytes());
  return read_range(f, 0, f.size(), path, kind);
}

}  // namespace foldcheck
