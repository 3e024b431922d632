// Reading input files with one set of error messages (input_file.hpp).
#include "foldcheck/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "foldcheck/errors.hpp"
#include "foldcheck/limits.hpp"
#include "foldcheck/reports/output_file.hpp"

namespace foldcheck {
namespace {

[[noreturn]] void cannot_read(const std::string& path, const std::string& kind, int err) {
  throw InputError(fmt::format("{}: cannot read {} ({})", path, kind, std::strerror(err)));
}

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::uint64_t max_input_bytes() { return 16 * static_cast<std::uint64_t>(max_elements()) + (std::uint64_t(1) << 20); }

std::string read_input_file(const std::string& path, const std::string& kind) {
  if (path.empty()) throw InputError(fmt::format("empty path for the {}", kind));
  const Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) cannot_read(path, kind, errno);
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) cannot_read(path, kind, errno);
  if (S_ISDIR(st.st_mode)) cannot_read(path, kind, EISDIR);
  // No output of this run may replace a file it reads (output_file.hpp).
  if (S_ISREG(st.st_mode)) reports::note_input_file(static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino));
  const std::uint64_t limit = max_input_bytes();
  auto too_big = [&](const std::string& size) {
    throw InputError(fmt::format("{}: {} bytes, over the limit of {} bytes for a {} (raise it with --max-elements or "
                                 "FOLDCHECK_MAX_ELEMENTS)",
                                 path, size, limit, kind));
  };
  std::string bytes;
  if (S_ISREG(st.st_mode)) {
    if (static_cast<std::uint64_t>(st.st_size) > limit) too_big(std::to_string(st.st_size));
    bytes.reserve(static_cast<std::size_t>(st.st_size));
  }
  char buf[1 << 16];
  while (true) {
    const ssize_t got = ::read(f.fd, buf, sizeof buf);
    if (got < 0) {
      if (errno == EINTR) continue;
      cannot_read(path, kind, errno);
    }
    if (got == 0) break;
    if (bytes.size() + static_cast<std::size_t>(got) > limit) too_big("more than " + std::to_string(limit));
    bytes.append(buf, static_cast<std::size_t>(got));
  }
  return bytes;
}

nlohmann::json parse_json_text(const std::string& text, const std::string& where) {
  using json = nlohmann::json;
  // Nesting is bounded (the DOM is recursive), and a key given twice in one object is
  // refused: JSON leaves duplicates undefined and nlohmann keeps the last, so `"eps": 1e-5,
  // ..., "eps": 0.1` would silently use one of two values the user wrote.
  std::vector<std::set<std::string>> open_objects;
  const json::parser_callback_t guard = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth > kMaxJsonDepth)
      throw InputError(fmt::format("{}: invalid JSON: nested deeper than {} levels", where, kMaxJsonDepth));
    if (event == json::parse_event_t::object_start) open_objects.emplace_back();
    if (event == json::parse_event_t::object_end && !open_objects.empty()) open_objects.pop_back();
    if (event == json::parse_event_t::key && !open_objects.empty() &&
        !open_objects.back().insert(parsed.get<std::string>()).second)
      throw InputError(fmt::format("{}: invalid JSON: key '{}' appears twice in one object", where, parsed.get<std::string>()));
    return true;
  };
  try {
    return json::parse(text, guard);
  } catch (const json::parse_error& e) {
    // nlohmann's what() starts "[json.exception.parse_error.101] parse error at ...": keep
    // the part after the tag.
    std::string why = e.what();
    if (why.rfind("[json.exception", 0) == 0 && why.find("] ") != std::string::npos) why = why.substr(why.find("] ") + 2);
    throw InputError(fmt::format("{}: invalid JSON: {}", where, why));
  }
}

nlohmann::json read_json_input(const std::string& path, const std::string& kind) {
  return parse_json_text(read_input_file(path, kind), path);
}

}  // namespace foldcheck
