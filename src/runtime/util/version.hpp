#pragma once
namespace kagent {
inline constexpr const char* kVersion = KAGENT_VERSION_STRING;
}
