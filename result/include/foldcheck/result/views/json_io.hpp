#pragma once
// Reading a command's JSON result into the typed views (views/*.hpp), in one place: the string
// keys the renderers used to look up, each looked up once here.
//
// Contract: a required key that is missing, or a value of the wrong type, throws
// nlohmann::json::exception (what the renderers' `.at()` threw; the commands report it as a
// malformed result). An optional key that is missing or null is std::nullopt. A verdict is
// restored from the name a result stores: restoring a verdict is not judging it (the judgement
// was made by the command that wrote the file, through judgement.hpp), and a name that is not
// one of the four is refused like any other malformed value.
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "foldcheck/result/verdict.hpp"

namespace foldcheck::result::views {

// j[key] as T; throws when key is missing or of another type.
template <class T>
T required(const nlohmann::json& j, const char* key) {
  return j.at(key).get<T>();
}

// j[key] as T, or nullopt when key is missing or null.
template <class T>
std::optional<T> optional(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return it->get<T>();
}

// The verdict a result stores under key (required), or under key if present (optional).
inline Verdict verdict_of(const nlohmann::json& value) {
  auto v = verdict_named(value.get<std::string>());
  if (!v) throw std::invalid_argument("not a verdict: " + value.dump());
  return *v;
}
inline Verdict required_verdict(const nlohmann::json& j, const char* key) { return verdict_of(j.at(key)); }
inline std::optional<Verdict> optional_verdict(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return verdict_of(*it);
}

// Each element of the array j[key] restored by from(element); empty when key is missing or null.
template <class F>
auto list_of(const nlohmann::json& j, const char* key, F&& from) {
  std::vector<decltype(from(j))> out;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return out;
  for (const auto& e : it->get_ref<const nlohmann::json::array_t&>()) out.push_back(from(e));
  return out;
}

}  // namespace foldcheck::result::views
