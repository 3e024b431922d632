#pragma once
// Files another program wrote for foldcheck into a directory foldcheck gave it (an engine
// adapter's OUTDIR; bisect --cmd's {out} in its temporary directory): ONE rule for every such
// file, whoever names it (the manifest, the folded model, value and output files, the {out}
// file). That program may be hostile or broken, and it has exited when its files are read,
// so nothing may wait for it.
//
// Contract: read_contained(dir, dir_name, path, kind) returns the whole file, or throws
// InputError naming `path` (and `dir_name`, "the adapter's output directory") when
//   - `dir` (foldcheck made it; its canonical path then, as every maker here gives it) is no
//     longer that directory: a component of its path is a link now. The
//     program may replace OUTDIR itself, or a directory above it, by a link to a directory
//     elsewhere: every file "inside" it would be read from there. A directory made anew at
//     the same place (rm -r, mkdir) is inside foldcheck's still, and is read;
//   - `path`, every link resolved, is not inside `dir` (links resolved): a link leading out
//     could make foldcheck read any file of the machine; `path` that is `dir` itself (".")
//     is refused as what it is, a directory;
//   - it is not a regular file (missing, a directory, a FIFO, a device, a socket): judged
//     with lstat after resolution, opened with O_NONBLOCK | O_NOFOLLOW (an open of a FIFO
//     for reading blocks until a writer comes, and the writer has exited: it would block
//     for ever, past every timeout), then fstat'd: a file swapped in between is refused too;
//   - it is larger than max_input_bytes() (limits.hpp, the element limit), from fstat,
//     before anything is read.
// A regular file's read ends: nothing here waits.
#include <cstdint>
#include <string>

namespace foldcheck {

std::string read_contained(const std::string& dir, const std::string& dir_name, const std::string& path,
                           const std::string& kind);

// The same rule, the file left open for reads of parts of it (a model's external data, whose
// every range is sized by its tensor's checked dims): `limit` bounds its whole size.
class ContainedFile {
 public:
  ContainedFile(int fd, std::uint64_t size) : fd_(fd), size_(size) {}
  ~ContainedFile();
  ContainedFile(ContainedFile&& o) noexcept;
  ContainedFile(const ContainedFile&) = delete;
  ContainedFile& operator=(const ContainedFile&) = delete;
  ContainedFile& operator=(ContainedFile&&) = delete;
  int fd() const { return fd_; }
  std::uint64_t size() const { return size_; }

 private:
  friend ContainedFile open_contained(const std::string&, const std::string&, const std::string&, const std::string&,
                                      std::uint64_t);
  int fd_;
  std::uint64_t size_;
};
ContainedFile open_contained(const std::string& dir, const std::string& dir_name, const std::string& path,
                             const std::string& kind, std::uint64_t limit);
// `length` bytes from `offset` (fewer when the file ends first).
std::string read_range(const ContainedFile& f, std::uint64_t offset, std::uint64_t length, const std::string& path,
                       const std::string& kind);

}  // namespace foldcheck
