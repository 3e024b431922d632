#pragma once
// Write a whole file atomically: the content goes to a temporary file in the same
// directory which is renamed over the target only after a successful write and flush,
// so an interrupted run never leaves a partial report. Throws std::runtime_error.
#include <string>

namespace foldcheck::reports {

void write_file_atomically(const std::string& path, const std::string& content);

}  // namespace foldcheck::reports
