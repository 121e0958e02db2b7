// Helpers shared by the store tests: a temporary folder per test and one-value queries.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "store/memory_store.hpp"

namespace kagent::store::testing {

// A fresh folder per test, removed at the end.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kagent-store-XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string file(const char* name) const { return (path / name).string(); }
};

// The integer in the first column of the last row (-1 when there is none).
inline int64_t count(MemoryStore& db, const std::string& sql, const Params& p = {}) {
  int64_t n = -1;
  db.query(sql, p, [&](const Statement& st) { n = std::get<int64_t>(st.column(0)); });
  return n;
}

inline std::string text(MemoryStore& db, const std::string& sql, const Params& p = {}) {
  std::string s;
  db.query(sql, p, [&](const Statement& st) { s = std::get<std::string>(st.column(0)); });
  return s;
}

}  // namespace kagent::store::testing
