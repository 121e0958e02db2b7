// Process-wide logging setup (spdlog): stderr, plus a file when asked; the status line that log
// lines pass above on a terminal.
#pragma once

#include <string>

namespace kagent {

// `color` is "auto" (colours on a terminal, none when NO_COLOR is set and not empty), "always" or
// "never". Returns an error message, or "" on success.
std::string setup_logging(const std::string& level, const std::string& file, const std::string& color = "auto");

// Shows `text` as the status line under the log on stderr ("" erases it): each log line erases
// it, is written, and draws it again below. The caller shows one only on a terminal.
void set_status_line(const std::string& text);

}  // namespace kagent
