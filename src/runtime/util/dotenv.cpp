#include "util/dotenv.hpp"

#include <cstdlib>
#include <fstream>
#include <string>

namespace kagent {
namespace {

std::string trim(const std::string& s) {
  const char* ws = " \t\r\n";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

std::map<std::string, std::string>& overridden() {
  static std::map<std::string, std::string> values;
  return values;
}

}  // namespace

const std::map<std::string, std::string>& dotenv_overridden() { return overridden(); }

int load_dotenv(const std::string& path) {
  std::ifstream in(path);
  if (!in) return -1;
  int set = 0;
  std::string line;
  while (std::getline(in, line)) {
    line = trim(line);
    if (line.empty() || line[0] == '#') continue;
    if (line.rfind("export ", 0) == 0) line = trim(line.substr(7));
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string key = trim(line.substr(0, eq));
    std::string value = trim(line.substr(eq + 1));
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') && value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
    } else {
      // An unquoted value ends at a " #" comment.
      size_t hash = value.find(" #");
      if (hash != std::string::npos) value = trim(value.substr(0, hash));
    }
    if (key.empty()) continue;
    if (const char* set_value = std::getenv(key.c_str()); set_value != nullptr) {  // the environment wins
      if (value != set_value) overridden()[key] = value;
      continue;
    }
    if (setenv(key.c_str(), value.c_str(), 0) == 0) ++set;
  }
  return set;
}

}  // namespace kagent
