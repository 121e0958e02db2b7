#include "store/sqlite_handle.hpp"

#include <cerrno>
#include <cstring>
#include <utility>

namespace kagent::store {

Connection::Connection(const std::string& path) {
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  const int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    close();
    throw DbError(rc, "cannot open " + path + ": " + msg);
  }
  sqlite3_extended_result_codes(db_, 1);
}

Connection::~Connection() { close(); }

Connection& Connection::operator=(Connection&& other) noexcept {
  if (this != &other) {
    close();
    db_ = std::exchange(other.db_, nullptr);
  }
  return *this;
}

void Connection::close() {
  if (db_ != nullptr) {
    // close_v2 defers the close until leftover statements are finalized instead of failing.
    sqlite3_close_v2(db_);
    db_ = nullptr;
  }
}

void Connection::fail(int rc, std::string_view context) const {
  std::string msg(context);
  if (!msg.empty()) msg += ": ";
  msg += db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  // SQLite's own words ("database or disk is full", "disk I/O error") do not say what the system
  // refused; a user freeing space or fixing permissions needs that (ENOSPC's text, say).
  // SQLITE_FULL is what the unix VFS makes of ENOSPC (or a short write); SQLite keeps the errno of
  // I/O and open failures only.
  const int primary = rc & 0xff;
  const int sys = primary == SQLITE_FULL ? ENOSPC
                  : (primary == SQLITE_IOERR || primary == SQLITE_CANTOPEN) && db_ != nullptr
                      ? sqlite3_system_errno(db_)
                      : 0;
  if (sys != 0) msg += std::string(" (") + std::strerror(sys) + ")";
  throw DbError(rc, msg);
}

void Connection::exec_script(const std::string& sql) {
  char* err = nullptr;
  const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err != nullptr ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    throw DbError(rc, msg);
  }
}

int64_t Connection::query_int(const std::string& sql) {
  Statement st(*this, sql);
  if (!st.step()) throw DbError(SQLITE_ERROR, "no row from: " + sql);
  const Value v = st.column(0);
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  throw DbError(SQLITE_MISMATCH, "not an integer from: " + sql);
}

Statement::Statement(const Connection& conn, std::string_view sql) : conn_(&conn) {
  const char* tail = nullptr;
  const int rc = sqlite3_prepare_v3(conn.get(), sql.data(), static_cast<int>(sql.size()),
                                    SQLITE_PREPARE_PERSISTENT, &stmt_, &tail);
  if (rc != SQLITE_OK) conn.fail(rc, "");  // SQLite's message names the problem
  if (stmt_ == nullptr) throw DbError(SQLITE_MISUSE, "empty SQL statement");
  // Trailing text after the first statement would be silently ignored: refuse it instead.
  for (; tail != nullptr && *tail != '\0'; ++tail) {
    const char c = *tail;
    if (c != ' ' && c != '\n' && c != '\t' && c != '\r' && c != ';') {
      sqlite3_finalize(stmt_);
      stmt_ = nullptr;
      throw DbError(SQLITE_MISUSE, "more than one statement in SQL with parameters");
    }
  }
}

Statement::~Statement() {
  if (stmt_ != nullptr) sqlite3_finalize(stmt_);
}

void Statement::bind_value(int index, const Value& v) {
  int rc = SQLITE_OK;
  if (std::holds_alternative<std::monostate>(v)) {
    rc = sqlite3_bind_null(stmt_, index);
  } else if (const auto* i = std::get_if<int64_t>(&v)) {
    rc = sqlite3_bind_int64(stmt_, index, *i);
  } else if (const auto* d = std::get_if<double>(&v)) {
    rc = sqlite3_bind_double(stmt_, index, *d);
  } else {
    const auto& s = std::get<std::string>(v);
    rc = sqlite3_bind_text64(stmt_, index, s.data(), s.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  }
  if (rc != SQLITE_OK) conn_->fail(rc, "bind");
}

void Statement::bind(const Params& params) {
  sqlite3_clear_bindings(stmt_);
  const int n = sqlite3_bind_parameter_count(stmt_);
  size_t next_positional = 0;
  for (int i = 1; i <= n; ++i) {
    const char* name = sqlite3_bind_parameter_name(stmt_, i);
    if (name == nullptr || name[0] == '?') {
      // `?NNN` names its own index; plain `?` takes the next value in order.
      const size_t slot = name != nullptr && name[1] != '\0' ? static_cast<size_t>(i - 1)
                                                             : next_positional;
      next_positional = slot + 1;
      if (slot < params.positional.size()) bind_value(i, params.positional[slot]);
      continue;
    }
    if (const auto it = params.named.find(name + 1); it != params.named.end()) {
      bind_value(i, it->second);
    } else if (params.lookup) {
      Value v;
      if (params.lookup(name + 1, v)) bind_value(i, v);
    }
  }
  if (params.positional.size() > static_cast<size_t>(n)) {
    throw DbError(SQLITE_RANGE, "too many parameters: the statement takes " + std::to_string(n));
  }
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  conn_->fail(rc, "");
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

Value Statement::column(int i) const {
  switch (sqlite3_column_type(stmt_, i)) {
    case SQLITE_INTEGER:
      return static_cast<int64_t>(sqlite3_column_int64(stmt_, i));
    case SQLITE_FLOAT:
      return sqlite3_column_double(stmt_, i);
    case SQLITE_TEXT:
    case SQLITE_BLOB: {
      const auto* p = static_cast<const char*>(sqlite3_column_blob(stmt_, i));
      const int len = sqlite3_column_bytes(stmt_, i);
      return std::string(p != nullptr ? p : "", static_cast<size_t>(len));
    }
    default:
      return std::monostate{};
  }
}

}  // namespace kagent::store
