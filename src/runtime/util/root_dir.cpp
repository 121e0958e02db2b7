#include "util/root_dir.hpp"

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace kagent {
namespace {

namespace fs = std::filesystem;

bool is_checkout(const fs::path& dir) {
  return fs::is_directory(dir / "agents") && fs::is_directory(dir / "src" / "gpu" / "eval");
}

bool is_installed_data(const fs::path& dir) {
  return fs::is_directory(dir / "agents") && fs::is_directory(dir / "eval" / "kagent_eval");
}

}  // namespace

std::string find_root() {
  if (const char* env = std::getenv("KAGENT_ROOT"); env != nullptr && *env != '\0')
    return fs::absolute(env).lexically_normal().string();
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    // An installed tree first: it may itself lie inside a checkout (a test unpacking a package).
    const fs::path share = (exe.parent_path() / ".." / "share" / "kagent-rt").lexically_normal();
    if (is_installed_data(share)) return share.string();
    for (fs::path dir = exe.parent_path(); !dir.empty(); dir = dir.parent_path()) {
      if (is_checkout(dir)) return dir.string();
      if (dir == dir.root_path()) break;
    }
  }
  if (is_installed_data(KAGENT_INSTALL_DATADIR)) return KAGENT_INSTALL_DATADIR;
  return KAGENT_SOURCE_DIR;
}

}  // namespace kagent
