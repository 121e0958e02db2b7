#include "util/logging.hpp"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <memory>
#include <vector>

namespace kagent {

namespace {

// https://no-color.org: a non-empty NO_COLOR turns colours off unless they are asked for.
bool color_mode_from(const std::string& color, spdlog::color_mode& mode) {
  if (color == "always") {
    mode = spdlog::color_mode::always;
  } else if (color == "never") {
    mode = spdlog::color_mode::never;
  } else if (color == "auto") {
    const char* no_color = std::getenv("NO_COLOR");
    mode = no_color != nullptr && *no_color != '\0' ? spdlog::color_mode::never : spdlog::color_mode::automatic;
  } else {
    return false;
  }
  return true;
}

}  // namespace

std::string setup_logging(const std::string& level, const std::string& file, const std::string& color) {
  auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off") return "unknown log level '" + level + "'";
  spdlog::color_mode mode{};
  if (!color_mode_from(color, mode)) return "unknown colour mode '" + color + "' (auto, always or never)";
  std::vector<spdlog::sink_ptr> sinks;
  sinks.push_back(std::make_shared<spdlog::sinks::stderr_color_sink_mt>(mode));
  if (!file.empty()) {
    try {
      sinks.push_back(std::make_shared<spdlog::sinks::basic_file_sink_mt>(file, false));
    } catch (const spdlog::spdlog_ex& e) {
      return std::string("cannot open log file: ") + e.what();
    }
  }
  auto logger = std::make_shared<spdlog::logger>("kagent", sinks.begin(), sinks.end());
  logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%-5l%$ %v");
  logger->set_level(lvl);
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(logger);
  return "";
}

}  // namespace kagent
