#include "foldcheck/io/output_file.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <stdexcept>
#include <utility>

namespace foldcheck {

namespace fs = std::filesystem;

namespace {

std::mutex inputs_mutex;
std::set<std::pair<std::uint64_t, std::uint64_t>>& inputs() {
  static std::set<std::pair<std::uint64_t, std::uint64_t>> s;
  return s;
}

bool is_noted_input(const struct stat& st) {
  const std::lock_guard<std::mutex> lock(inputs_mutex);
  return inputs().count({static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino)}) != 0;
}

std::string errno_text(int err) { return std::strerror(err); }

// Where the bytes go. A symlink is followed to what it names, so that a link to a report is
// updated rather than replaced by a file; `through` is set when that is an existing file
// that is not a regular one (a device such as /dev/null, a FIFO, a terminal): those are
// written in place and never replaced, since renaming over /dev/null as root would
// replace the machine's /dev/null.
struct Target {
  fs::path path;
  bool exists = false;
  bool through = false;
  struct stat st {};
};

Target resolve(const std::string& path) {
  Target t;
  t.path = path;
  struct stat lst {};
  if (::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
    std::error_code ec;
    const fs::path real = fs::weakly_canonical(path, ec);
    if (!ec) t.path = real;
  }
  if (::stat(t.path.c_str(), &t.st) == 0) {
    t.exists = true;
    t.through = !S_ISREG(t.st.st_mode) && !S_ISDIR(t.st.st_mode);
  }
  return t;
}

// A new, empty file in `dir` created exclusively (O_CREAT | O_EXCL: never an existing file,
// never through a symlink planted at its name) under a random name of fixed length, so a
// target name of up to NAME_MAX bytes still has a temporary. Returns the descriptor (or -1
// with errno set) and the name.
int create_temporary(const fs::path& dir, fs::path& name) {
  static const char hex[] = "0123456789abcdef";
  for (int attempt = 0; attempt < 64; ++attempt) {
    unsigned char r[8];
    if (::getrandom(r, sizeof r, 0) != static_cast<ssize_t>(sizeof r)) return -1;
    std::string leaf = ".foldcheck-";
    for (const unsigned char b : r) {
      leaf += hex[b >> 4];
      leaf += hex[b & 15];
    }
    leaf += ".tmp";
    name = (dir.empty() ? fs::path(".") : dir) / leaf;
    const int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  errno = EEXIST;
  return -1;
}

// All of `content` to `fd` (partial writes and EINTR retried); false with errno set.
bool write_all(int fd, const std::string& content) {
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  return true;
}

void write_through(const std::string& shown, const Target& t, const std::string& content) {
  const int fd = ::open(t.path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw std::runtime_error(shown + ": cannot write (" + errno_text(errno) + ")");
  const bool ok = write_all(fd, content);
  const int err = errno;
  ::close(fd);
  if (!ok) throw std::runtime_error(shown + ": write failed (" + errno_text(err) + ")");
}

void write_replacing(const std::string& shown, const Target& t, const std::string& content) {
  fs::path tmp;
  const int fd = create_temporary(t.path.parent_path(), tmp);
  if (fd < 0) throw std::runtime_error(shown + ": cannot write (" + errno_text(errno) + ")");
  // A report replacing a file keeps that file's permissions; a new one gets 0666 & ~umask.
  if (t.exists) (void)::fchmod(fd, t.st.st_mode & 07777);
  const bool ok = write_all(fd, content) && ::fsync(fd) == 0;
  const int err = errno;
  if (::close(fd) != 0 || !ok) {
    ::unlink(tmp.c_str());
    throw std::runtime_error(shown + ": write failed (" + errno_text(err) + ")");
  }
  if (::rename(tmp.c_str(), t.path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error(shown + ": cannot rename into place (" + errno_text(e) + ")");
  }
}

std::string also_input(const std::string& path) {
  return path + ": is also an input of this command (refused: it would be overwritten)";
}

}  // namespace

void note_input_file(std::uint64_t device, std::uint64_t inode) {
  const std::lock_guard<std::mutex> lock(inputs_mutex);
  inputs().insert({device, inode});
}

std::string input_clash(const std::string& path) {
  const Target t = resolve(path);
  return t.exists && is_noted_input(t.st) ? also_input(path) : "";
}

std::string writable_problem(const std::string& path) {
  if (path.empty()) return "empty output path";
  const Target t = resolve(path);
  if (t.exists && S_ISDIR(t.st.st_mode)) return path + ": cannot write (" + errno_text(EISDIR) + ")";
  if (t.exists && is_noted_input(t.st)) return also_input(path);
  if (t.through) return ::access(t.path.c_str(), W_OK) == 0 ? "" : path + ": cannot write (" + errno_text(errno) + ")";
  // The temporary's name is short whatever the target's: the target's own length is checked
  // here, or a name over NAME_MAX would fail only at the rename, after the run.
  const fs::path dir = t.path.parent_path().empty() ? fs::path(".") : t.path.parent_path();
  const long name_max = ::pathconf(dir.c_str(), _PC_NAME_MAX);
  if (name_max > 0 && t.path.filename().string().size() > static_cast<std::size_t>(name_max))
    return path + ": cannot write (" + errno_text(ENAMETOOLONG) + ")";
  fs::path tmp;
  const int fd = create_temporary(t.path.parent_path(), tmp);
  if (fd < 0) return path + ": cannot write (" + errno_text(errno) + ")";
  ::close(fd);
  ::unlink(tmp.c_str());
  return "";
}

void write_file_atomically(const std::string& path, const std::string& content) {
  const Target t = resolve(path);
  if (t.exists && S_ISDIR(t.st.st_mode)) throw std::runtime_error(path + ": cannot write (" + errno_text(EISDIR) + ")");
  if (t.exists && is_noted_input(t.st)) throw std::runtime_error(also_input(path));
  if (t.through)
    write_through(path, t, content);
  else
    write_replacing(path, t, content);
}

}  // namespace foldcheck
