// Process-wide logging setup (spdlog): stderr, plus a file when asked.
#pragma once

#include <string>

namespace kagent {

// Returns an error message, or "" on success.
std::string setup_logging(const std::string& level, const std::string& file);

}  // namespace kagent
