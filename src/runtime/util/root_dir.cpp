#include "util/root_dir.hpp"

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace kagent {

std::string find_root() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("KAGENT_ROOT"); env != nullptr && *env != '\0')
    return fs::absolute(env).lexically_normal().string();
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path dir = exe.parent_path(); !dir.empty(); dir = dir.parent_path()) {
      if (fs::is_directory(dir / "agents") && fs::is_directory(dir / "src" / "gpu" / "eval"))
        return dir.string();
      if (dir == dir.root_path()) break;
    }
  }
  return KAGENT_SOURCE_DIR;
}

}  // namespace kagent
