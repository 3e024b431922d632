#pragma once
// Writing output files.
//
// write_file_atomically(path, content): a regular file (new, or replacing one) is written
// to a temporary file created exclusively (O_EXCL | O_NOFOLLOW, a random fixed-length
// name) in the target's directory and renamed over the target only after a complete write
// and fsync, so an interrupted run never leaves a partial report and a symlink planted at
// the temporary's name is never followed. A failed write (disk full, file size limit, I/O
// error) removes the temporary and leaves the previous file as it was. A symlink at `path`
// is followed (the file it names is replaced, the link kept). An existing file that is not
// regular (/dev/null, /dev/stdout on a pipe or terminal, a FIFO) is written in place and
// never replaced. A file this process noted as one of its inputs is never written. Throws
// std::runtime_error "PATH: ... (REASON)".
//
// writable_problem tells, before a long run, whether `path` could be written: "" if so
// (for a regular target: a temporary can be created in its directory; the probe is
// removed), else the reason ("PATH: cannot write (No such file or directory)").
//
// note_input_file records a file (device, inode) read as an input, so that no output
// replaces it (`run case.json -o case.json`). This is the write-time half of one rule,
// "no output is an input". The parse-time half, refuse_outputs_that_are_inputs
// (harness/cli/common.hpp), refuses before a long run but sees only the files named on the
// command line; this half sees every file actually read (the reader, read_input_file, and
// ONNX external data note them), including those named inside other files (a suite's
// cases, a model's data). Both name the clash the same way: "... (refused: it would be
// overwritten)".
#include <cstdint>
#include <string>

namespace foldcheck {

void write_file_atomically(const std::string& path, const std::string& content);
std::string writable_problem(const std::string& path);
void note_input_file(std::uint64_t device, std::uint64_t inode);
// "" unless `path` (followed through links) is a file noted as an input; then the reason.
std::string input_clash(const std::string& path);

}  // namespace foldcheck
