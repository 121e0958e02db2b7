#include "util/entry_points.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace kagent {

namespace {

// summary_of(path, name) -> the text after "-- agents/NAME.lua: " on the file's first line, its
// final period dropped; "" when the line is not of that form
std::string summary_of(const std::filesystem::path& path, const std::string& name) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return "";
  const std::string head = "-- agents/" + name + ".lua: ";
  if (line.rfind(head, 0) != 0) return "";
  std::string text = line.substr(head.size());
  while (!text.empty() && (text.back() == '.' || text.back() == ' ' || text.back() == '\r')) text.pop_back();
  return text;
}

}  // namespace

std::string entry_points_help(const std::string& root) {
  std::error_code ec;
  std::vector<std::pair<std::string, std::string>> found;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(root) / "agents", ec)) {
    if (!e.is_regular_file() || e.path().extension() != ".lua") continue;
    const std::string name = e.path().stem().string();
    found.emplace_back(name, summary_of(e.path(), name));
  }
  if (found.empty()) return "";
  std::sort(found.begin(), found.end());
  std::string out = "Entry points (kagent-rt agents/NAME.lua --help says more):\n";
  for (const auto& [name, summary] : found) {
    std::string label = "  agents/" + name + ".lua";
    label.resize(std::max<size_t>(label.size() + 1, 24), ' ');
    out += label + (summary.empty() ? "(its first line names no summary)" : summary) + "\n";
  }
  out.pop_back();  // the help's own layout ends the footer's line
  return out;
}

}  // namespace kagent
