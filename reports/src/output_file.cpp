#include "foldcheck/reports/output_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <unistd.h>

namespace foldcheck::reports {

namespace {

// ".NAME.tmpPID" beside the target: same file system, so the rename is atomic.
std::filesystem::path temporary_for(const std::string& path) {
  const std::filesystem::path target(path);
  std::string tmp_name = ".";
  tmp_name += target.filename().string();
  tmp_name += ".tmp";
  tmp_name += std::to_string(getpid());
  return target.parent_path() / tmp_name;
}

}  // namespace

std::string writable_problem(const std::string& path) {
  if (path.empty()) return "empty output path";
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return path + ": cannot write (" + std::strerror(EISDIR) + ")";
  const std::filesystem::path tmp = temporary_for(path);
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return path + ": cannot write (" + std::strerror(errno) + ")";
  std::fclose(f);
  std::remove(tmp.c_str());
  return "";
}

void write_file_atomically(const std::string& path, const std::string& content) {
  const std::filesystem::path tmp = temporary_for(path);
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw std::runtime_error(path + ": cannot write (" + std::strerror(errno) + ")");
  const bool ok = std::fwrite(content.data(), 1, content.size(), f) == content.size() && std::fflush(f) == 0 &&
                  fsync(fileno(f)) == 0;
  const int err = errno;
  if (std::fclose(f) != 0 || !ok) {
    std::remove(tmp.c_str());
    throw std::runtime_error(path + ": write failed (" + std::strerror(err) + ")");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    throw std::runtime_error(path + ": cannot rename into place (" + std::strerror(e) + ")");
  }
}

}  // namespace foldcheck::reports
