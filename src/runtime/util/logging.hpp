// Process-wide logging setup (spdlog): stderr, plus a file when asked.
#pragma once

#include <string>

namespace kagent {

// `color` is "auto" (colours on a terminal, none when NO_COLOR is set and not empty), "always" or
// "never". Returns an error message, or "" on success.
std::string setup_logging(const std::string& level, const std::string& file, const std::string& color = "auto");

}  // namespace kagent
