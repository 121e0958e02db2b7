// MemoryStore: kagent-rt's one SQLite database (short- and long-term memory, LLM cache).
// Opening it sets the durability pragmas and migrates the schema; statements are prepared once
// and cached by their SQL text, because agents run the same few queries thousands of times.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "store/sqlite_handle.hpp"
#include "store/value.hpp"

namespace kagent::store {

struct ExecResult {
  int64_t changes = 0;
  int64_t last_insert_id = 0;
};

class MemoryStore {
 public:
  // Called once per result row; `st` is positioned on the row.
  using RowFn = std::function<void(const Statement& st)>;

  // Opens or creates `path` (":memory:" for a private in-memory database), sets WAL,
  // synchronous=NORMAL, busy timeout and foreign keys, and migrates to the latest schema.
  // Throws DbError (also for a database from a newer schema, or SQLite without FTS5).
  // busy_timeout_ms: how long SQLite itself sleeps on another process's lock, on the caller's
  // thread; the Lua binding passes 0 and kagent/mem.lua waits off the event loop instead.
  explicit MemoryStore(const std::string& path, int busy_timeout_ms = 5000);
  ~MemoryStore();
  MemoryStore(const MemoryStore&) = delete;
  MemoryStore& operator=(const MemoryStore&) = delete;

  const std::string& path() const { return path_; }
  int schema_version() const { return schema_version_; }
  bool in_transaction() const;

  // One statement with bound parameters.
  ExecResult exec(const std::string& sql, const Params& params);
  // Several statements without parameters (DDL, BEGIN/COMMIT).
  ExecResult exec_script(const std::string& sql);
  // One statement; `on_row` sees each row. Returns the number of rows.
  int64_t query(const std::string& sql, const Params& params, const RowFn& on_row);

  // Finalizes cached statements and closes; later calls throw DbError.
  void close();
  bool is_open() const { return conn_.is_open(); }

 private:
  Statement& prepared(const std::string& sql);
  void require_open() const;
  ExecResult result_since(int64_t total_before) const;

  std::string path_;
  Connection conn_;
  int schema_version_ = 0;
  // Bounded so ad-hoc SQL built by a script cannot grow it without end.
  std::unordered_map<std::string, std::unique_ptr<Statement>> cache_;
  static constexpr size_t kMaxCached = 256;
};

}  // namespace kagent::store
