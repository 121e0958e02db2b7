#include "util/logging.hpp"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

namespace kagent {

namespace {

// The status line shown under the log on a terminal, and the lock every write to stderr from
// the log or the status takes, so a log line never lands on the end of the status line.
std::mutex status_mutex;
std::string status_text;

void write_status_locked() {
  if (status_text.empty()) return;
  std::fputs(status_text.c_str(), stderr);
  std::fflush(stderr);
}

void erase_status_locked() {
  if (status_text.empty()) return;
  std::fputs("\r\033[K", stderr);
}

// The stderr sink: the status line is erased, the log line written, and the status line drawn
// again below it (as tqdm.write does).
class StatusAwareSink final : public spdlog::sinks::sink {
 public:
  explicit StatusAwareSink(spdlog::color_mode mode)
      : inner_(std::make_unique<spdlog::sinks::stderr_color_sink_mt>(mode)) {}
  void log(const spdlog::details::log_msg& msg) override {
    std::lock_guard<std::mutex> lock(status_mutex);
    erase_status_locked();
    inner_->log(msg);
    write_status_locked();
  }
  void flush() override { inner_->flush(); }
  void set_pattern(const std::string& pattern) override { inner_->set_pattern(pattern); }
  void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override {
    inner_->set_formatter(std::move(formatter));
  }

 private:
  std::unique_ptr<spdlog::sinks::sink> inner_;
};

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
  sinks.push_back(std::make_shared<StatusAwareSink>(mode));
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

void set_status_line(const std::string& text) {
  std::lock_guard<std::mutex> lock(status_mutex);
  erase_status_locked();
  // one line: a newline in it would leave a copy behind at every redraw
  status_text = text.substr(0, text.find('\n'));
  write_status_locked();
  if (status_text.empty()) std::fflush(stderr);
}

}  // namespace kagent
