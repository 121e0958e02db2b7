#include "store/memory_store.hpp"

#include "store/schema.hpp"

namespace kagent::store {

MemoryStore::MemoryStore(const std::string& path, int busy_timeout_ms)
    : path_(path), conn_(path) {
  if (sqlite3_compileoption_used("ENABLE_FTS5") == 0) {
    throw DbError(SQLITE_ERROR, "this SQLite was built without FTS5 (needed for lesson search)");
  }
  sqlite3_busy_timeout(conn_.get(), busy_timeout_ms);
  // WAL + NORMAL: a commit is a write() into the WAL before step() returns, so a killed process
  // loses nothing it committed; only power loss can drop the newest commits (never corrupting).
  // A checkpoint every 4000 WAL pages (16 MiB) instead of 1000: checkpoints copy and fsync, and
  // with one commit per attempt they dominated the write path (mem_bench: about 2x faster).
  conn_.exec_script(
      "PRAGMA journal_mode = WAL;"
      "PRAGMA synchronous = NORMAL;"
      "PRAGMA foreign_keys = ON;"
      "PRAGMA wal_autocheckpoint = 4000;");
  if (conn_.query_int("PRAGMA foreign_keys") != 1) {
    throw DbError(SQLITE_ERROR, "cannot enable foreign keys on " + path);
  }
  schema_version_ = apply_migrations(conn_, schema_migrations(), path);
}

MemoryStore::~MemoryStore() { close(); }

void MemoryStore::close() {
  cache_.clear();  // statements first: they belong to the connection
  if (conn_.is_open()) {
    // Refreshes planner statistics where they are stale; cheap, and failure is harmless.
    sqlite3_exec(conn_.get(), "PRAGMA optimize", nullptr, nullptr, nullptr);
  }
  conn_.close();
}

void MemoryStore::require_open() const {
  if (!conn_.is_open()) throw DbError(SQLITE_MISUSE, "database " + path_ + " is closed");
}

bool MemoryStore::in_transaction() const {
  return conn_.is_open() && sqlite3_get_autocommit(conn_.get()) == 0;
}

Statement& MemoryStore::prepared(const std::string& sql) {
  require_open();
  if (auto it = cache_.find(sql); it != cache_.end()) return *it->second;
  if (cache_.size() >= kMaxCached) cache_.clear();
  auto st = std::make_unique<Statement>(conn_, sql);
  return *cache_.emplace(sql, std::move(st)).first->second;
}

// sqlite3_changes() keeps the count of the last INSERT/UPDATE/DELETE across other statements, so
// a CREATE after an INSERT would report the INSERT's rows: report it only if this call changed any.
ExecResult MemoryStore::result_since(int64_t total_before) const {
  const int64_t changed = sqlite3_total_changes64(conn_.get()) - total_before;
  return ExecResult{changed > 0 ? conn_.changes() : 0, conn_.last_insert_id()};
}

ExecResult MemoryStore::exec(const std::string& sql, const Params& params) {
  Statement& st = prepared(sql);
  const int64_t before = sqlite3_total_changes64(conn_.get());
  ResetOnExit reset(st);
  st.bind(params);
  while (st.step()) {
  }
  return result_since(before);
}

ExecResult MemoryStore::exec_script(const std::string& sql) {
  require_open();
  const int64_t before = sqlite3_total_changes64(conn_.get());
  conn_.exec_script(sql);
  return result_since(before);
}

int64_t MemoryStore::query(const std::string& sql, const Params& params, const RowFn& on_row) {
  Statement& st = prepared(sql);
  ResetOnExit reset(st);
  st.bind(params);
  int64_t n = 0;
  while (st.step()) {
    on_row(st);
    ++n;
  }
  return n;
}

}  // namespace kagent::store
