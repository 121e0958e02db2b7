// RAII owners of SQLite handles: a Connection closes its sqlite3*, a Statement finalizes its
// sqlite3_stmt*. Errors are thrown as DbError so callers cannot forget to check a return code.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "store/value.hpp"

namespace kagent::store {

class DbError : public std::runtime_error {
 public:
  DbError(int code, const std::string& what) : std::runtime_error(what), code_(code) {}
  int sqlite_code() const { return code_; }

 private:
  int code_;
};

class Connection {
 public:
  Connection() = default;
  // Opens (creating if needed) the database at `path`; throws DbError.
  explicit Connection(const std::string& path);
  ~Connection();
  Connection(Connection&& other) noexcept : db_(other.db_) { other.db_ = nullptr; }
  Connection& operator=(Connection&& other) noexcept;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  sqlite3* get() const { return db_; }
  bool is_open() const { return db_ != nullptr; }
  void close();

  // Runs SQL text that may hold several statements and takes no parameters.
  void exec_script(const std::string& sql);
  // Runs a single-row, single-column query (PRAGMAs) and returns its integer.
  int64_t query_int(const std::string& sql);
  int64_t changes() const { return sqlite3_changes64(db_); }
  int64_t last_insert_id() const { return sqlite3_last_insert_rowid(db_); }

  // Throws DbError with "<context>: " (if any) and the connection's current error message.
  [[noreturn]] void fail(int rc, std::string_view context) const;

 private:
  sqlite3* db_ = nullptr;
};

class Statement {
 public:
  Statement(const Connection& conn, std::string_view sql);
  ~Statement();
  Statement(Statement&& other) noexcept : conn_(other.conn_), stmt_(other.stmt_) {
    other.stmt_ = nullptr;
  }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  Statement& operator=(Statement&&) = delete;

  // Binds every parameter of the statement from `params` (missing ones bind NULL).
  void bind(const Params& params);
  // Advances; true while a row is available. Throws DbError on failure.
  bool step();
  // Makes the statement reusable and drops its bindings.
  void reset();

  int column_count() const { return sqlite3_column_count(stmt_); }
  const char* column_name(int i) const { return sqlite3_column_name(stmt_, i); }
  Value column(int i) const;
  sqlite3_stmt* get() const { return stmt_; }
  const char* sql() const { return sqlite3_sql(stmt_); }

 private:
  void bind_value(int index, const Value& v);

  const Connection* conn_;
  sqlite3_stmt* stmt_ = nullptr;
};

// Resets a statement when a scope ends, so a cached statement never stays mid-step (which would
// keep a read transaction open and block WAL checkpoints).
class ResetOnExit {
 public:
  explicit ResetOnExit(Statement& s) : s_(s) {}
  ~ResetOnExit() { s_.reset(); }
  ResetOnExit(const ResetOnExit&) = delete;
  ResetOnExit& operator=(const ResetOnExit&) = delete;

 private:
  Statement& s_;
};

}  // namespace kagent::store
