#pragma once
// Write a whole file atomically: the content goes to a temporary file in the same
// directory which is renamed over the target only after a successful write and flush,
// so an interrupted run never leaves a partial report. A failed write (disk full, file
// size limit, I/O error) removes the temporary file and leaves any previous file at
// `path` as it was. Throws std::runtime_error "PATH: ... (REASON)".
//
// writable_problem tells, before a long run, whether `path` could be written: "" if a
// file can be created in its directory (the probe is created and removed), else the
// reason ("PATH: cannot write (No such file or directory)").
#include <string>

namespace foldcheck::reports {

void write_file_atomically(const std::string& path, const std::string& content);
std::string writable_problem(const std::string& path);

}  // namespace foldcheck::reports
