#pragma once
namespace foldcheck {
inline constexpr const char* kVersion = "0.1.0";
}
