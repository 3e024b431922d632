#pragma once
// Reading a command's JSON result into the typed views (views/*.hpp), in one place: the string
// keys the renderers used to look up, each looked up once here.
//
// Contract: a required key that is missing, or a value of the wrong type, throws
// nlohmann::json::exception (what the renderers' `.at()` threw; the commands report it as a
// malformed result, naming the file). An optional key that is missing or null is std::nullopt;
// present, it is held to its type like a required one: a count written as "7" or 1e300 is a
// malformed result, never read as none, as 0 or as a wrapped integer. A number read as an
// integer must be a JSON integer within the integer type's range (converting a double outside
// it is undefined behaviour); one read as a floating-point value must be a JSON number. A
// verdict is restored from the name a result stores: restoring a verdict is not judging it (the
// judgement was made by the command that wrote the file, through judgement.hpp), and a name that
// is not one of the four is refused like any other malformed value.
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "foldcheck/result/verdict.hpp"

namespace foldcheck::result::views {

// A JSON value as T, held to T's type (the contract above); other types as nlohmann reads them.
template <class T>
T value_as(const nlohmann::json& v);

namespace detail {
[[noreturn]] inline void malformed(const nlohmann::json& v, const std::string& what) {
  throw nlohmann::json::type_error::create(302, what + ", but is " + v.dump(), &v);
}
template <class T>
struct IsVector : std::false_type {};
template <class U>
struct IsVector<std::vector<U>> : std::true_type {};

template <class T>
T integer_as(const nlohmann::json& v) {
  if (!v.is_number_integer()) malformed(v, "type must be an integer");
  using L = std::numeric_limits<T>;
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(L::max())) malformed(v, "integer out of range");
    return static_cast<T>(u);
  }
  const auto i = v.get<std::int64_t>();
  if (i < 0 && !L::is_signed) malformed(v, "integer must not be negative");
  if constexpr (L::is_signed) {
    if (i < static_cast<std::int64_t>(L::min()) || i > static_cast<std::int64_t>(L::max()))
      malformed(v, "integer out of range");
  } else if (static_cast<std::uint64_t>(i) > static_cast<std::uint64_t>(L::max())) {
    malformed(v, "integer out of range");
  }
  return static_cast<T>(i);
}
}  // namespace detail

template <class T>
T value_as(const nlohmann::json& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    return detail::integer_as<T>(v);
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number()) detail::malformed(v, "type must be number");
    return v.get<T>();
  } else if constexpr (detail::IsVector<T>::value) {
    T out;
    for (const auto& e : v.get_ref<const nlohmann::json::array_t&>())
      out.push_back(value_as<typename T::value_type>(e));
    return out;
  } else {
    return v.get<T>();
  }
}

// j[key] as T; throws when key is missing or of another type.
template <class T>
T required(const nlohmann::json& j, const char* key) {
  return value_as<T>(j.at(key));
}

// j[key] as T, or nullopt when key is missing or null; any other value held to T's type.
template <class T>
std::optional<T> optional(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return value_as<T>(*it);
}

// A count or an index (elements, channels, layers, rows, beyond-bound or NaN elements, a channel's
// or an element's index) as T: a JSON integer from 0 to T's largest. A negative one is a malformed
// result naming its key: a report fed back (compare, merge, summary) with "beyond_bound": -3 would
// otherwise be read as fewer failures than none.
template <class T = std::int64_t>
T count_as(const nlohmann::json& v, const std::string& key) {
  if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<std::int64_t>() < 0))
    detail::malformed(v, "'" + key + "' is a count or an index: it must be a non-negative integer");
  return value_as<T>(v);
}
template <class T = std::int64_t>
T required_count(const nlohmann::json& j, const char* key) {
  if (!j.contains(key)) (void)j.at(key);  // the missing key's own error
  return count_as<T>(j.at(key), key);
}
template <class T = std::int64_t>
std::optional<T> optional_count(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return count_as<T>(*it, key);
}

// v as an object, or nullptr when v is null (a part written as null: absent); a value of any
// other type throws (a malformed result, never read as absent).
inline const nlohmann::json* object_or_null(const nlohmann::json& v) {
  if (v.is_null()) return nullptr;
  if (!v.is_object()) detail::malformed(v, "type must be object");
  return &v;
}
// j[key] as an object, or nullptr when key is missing or null; a value of another type throws.
inline const nlohmann::json* object_at(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() ? nullptr : object_or_null(*it);
}

// The verdict a result stores under key (required), or under key if present (optional).
inline Verdict verdict_of(const nlohmann::json& value) {
  auto v = verdict_named(value.get<std::string>());
  if (!v) detail::malformed(value, "not a verdict");
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
