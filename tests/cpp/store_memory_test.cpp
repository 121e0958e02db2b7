// MemoryStore on real SQLite files: pragmas, migrations, bound parameters, FTS5, errors.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "store/memory_store.hpp"
#include "store/schema.hpp"
#include "store_test_util.hpp"

namespace fs = std::filesystem;
using kagent::store::Connection;
using kagent::store::DbError;
using kagent::store::MemoryStore;
using kagent::store::Migration;
using kagent::store::Params;
using kagent::store::Statement;
using kagent::store::Value;
using kagent::store::testing::count;
using kagent::store::testing::TempDir;
using kagent::store::testing::text;

TEST_CASE("a new database is in WAL mode with foreign keys and the latest schema", "[store]") {
  TempDir dir;
  MemoryStore db(dir.file("k.db"));
  CHECK(db.schema_version() == kagent::store::latest_schema_version());
  CHECK(text(db, "PRAGMA journal_mode") == "wal");
  CHECK(count(db, "PRAGMA foreign_keys") == 1);
  CHECK(count(db, "PRAGMA synchronous") == 1);  // NORMAL
  CHECK(count(db, "PRAGMA user_version") == db.schema_version());
  for (const char* t : {"runs", "rounds", "attempts", "reflexions", "skills", "skill_outcomes",
                        "lessons", "lessons_fts", "archive", "llm_cache"}) {
    INFO(t);
    CHECK(count(db, "SELECT count(*) FROM sqlite_master WHERE name = ?", {{std::string(t)}, {}}) == 1);
  }
}

TEST_CASE("reopening keeps data and does not migrate again", "[store]") {
  TempDir dir;
  {
    MemoryStore db(dir.file("k.db"));
    db.exec("INSERT INTO runs(problem, started) VALUES (?, ?)", {{std::string("p"), 1.5}, {}});
  }
  MemoryStore db(dir.file("k.db"));
  CHECK(count(db, "SELECT count(*) FROM runs") == 1);
  CHECK(text(db, "SELECT problem FROM runs") == "p");
}

TEST_CASE("a database from a newer schema is refused with a clear message", "[store]") {
  TempDir dir;
  {
    Connection c(dir.file("new.db"));
    c.exec_script("PRAGMA user_version = 99");
  }
  try {
    MemoryStore db(dir.file("new.db"));
    FAIL("opened a newer database");
  } catch (const DbError& e) {
    const std::string msg = e.what();
    CHECK(msg.find("schema version 99") != std::string::npos);
    CHECK(msg.find("newer than this kagent-rt supports") != std::string::npos);
  }
}

TEST_CASE("migrations run forward from the stored version only", "[store]") {
  TempDir dir;
  const Migration v1[] = {{1, "CREATE TABLE a(x INTEGER);"}};
  const Migration v2[] = {{1, "CREATE TABLE a(x INTEGER);"},
                          {2, "ALTER TABLE a ADD COLUMN y TEXT; INSERT INTO a VALUES (7, 'm2');"}};
  Connection c(dir.file("m.db"));
  CHECK(kagent::store::apply_migrations(c, v1, "m.db") == 1);
  c.exec_script("INSERT INTO a VALUES (1)");
  CHECK(kagent::store::apply_migrations(c, v2, "m.db") == 2);
  CHECK(c.query_int("SELECT count(*) FROM a") == 2);  // v1 did not run twice
  CHECK(c.query_int("PRAGMA user_version") == 2);
  CHECK(kagent::store::apply_migrations(c, v2, "m.db") == 2);
  CHECK(c.query_int("SELECT count(*) FROM a") == 2);
}

TEST_CASE("a failing migration rolls back and leaves the version unchanged", "[store]") {
  TempDir dir;
  const Migration bad[] = {{1, "CREATE TABLE a(x); CREATE TABLE a(x);"}};
  Connection c(dir.file("b.db"));
  REQUIRE_THROWS_AS(kagent::store::apply_migrations(c, bad, "b.db"), DbError);
  CHECK(c.query_int("PRAGMA user_version") == 0);
  CHECK(c.query_int("SELECT count(*) FROM sqlite_master WHERE name = 'a'") == 0);
}

TEST_CASE("named and positional parameters bind; missing names bind NULL", "[store]") {
  TempDir dir;
  MemoryStore db(dir.file("k.db"));
  Params p;
  p.named = {{"problem", std::string("rms")}, {"started", 2.0}};
  const auto r = db.exec("INSERT INTO runs(problem, gpu, started) VALUES (:problem, :gpu, :started)", p);
  CHECK(r.changes == 1);
  CHECK(r.last_insert_id == 1);
  CHECK(count(db, "SELECT count(*) FROM runs WHERE gpu IS NULL AND problem = ?",
              {{std::string("rms")}, {}}) == 1);
  std::vector<std::vector<Value>> rows;
  db.query("SELECT id, problem, started, gpu FROM runs", {}, [&](const Statement& st) {
    rows.push_back({st.column(0), st.column(1), st.column(2), st.column(3)});
  });
  REQUIRE(rows.size() == 1);
  CHECK(std::get<int64_t>(rows[0][0]) == 1);
  CHECK(std::get<double>(rows[0][2]) == 2.0);
  CHECK(std::holds_alternative<std::monostate>(rows[0][3]));
}

TEST_CASE("foreign keys are enforced", "[store]") {
  TempDir dir;
  MemoryStore db(dir.file("k.db"));
  CHECK_THROWS_AS(db.exec("INSERT INTO attempts(run_id, created) VALUES (?, ?)",
                          {{int64_t{42}, 1.0}, {}}),
                  DbError);
}

TEST_CASE("SQL errors carry SQLite's message; several statements with parameters are refused",
          "[store]") {
  TempDir dir;
  MemoryStore db(dir.file("k.db"));
  try {
    db.exec("SELEC 1", {});
    FAIL("no error");
  } catch (const DbError& e) {
    CHECK(std::string(e.what()).find("syntax error") != std::string::npos);
  }
  try {
    db.exec("SELECT 1; SELECT 2", {{int64_t{1}}, {}});
    FAIL("no error");
  } catch (const DbError& e) {
    CHECK(e.sqlite_code() == SQLITE_MISUSE);
  }
  // The cached statement is reset after a failure and works again.
  CHECK_THROWS_AS(db.exec("INSERT INTO llm_cache(key, created) VALUES (?, ?)",
                          {{std::string("k"), Value{}}, {}}),
                  DbError);
  db.exec("INSERT INTO llm_cache(key, created) VALUES (?, ?)", {{std::string("k"), 1.0}, {}});
  CHECK(count(db, "SELECT count(*) FROM llm_cache") == 1);
}

TEST_CASE("lessons are searchable with FTS5 and the index follows updates and deletes", "[store]") {
  TempDir dir;
  MemoryStore db(dir.file("k.db"));
  db.exec("INSERT INTO lessons(text, tags, created) VALUES (?, ?, 1)",
          {{std::string("vectorize loads with float4 to cut DRAM transactions"),
            std::string("[\"memory\"]")}, {}});
  db.exec("INSERT INTO lessons(text, tags, created) VALUES (?, ?, 1)",
          {{std::string("use tensor cores for the GEMM"), std::string("[\"compute\"]")}, {}});
  const std::string match = "SELECT count(*) FROM lessons_fts WHERE lessons_fts MATCH ?";
  CHECK(count(db, match, {{std::string("dram")}, {}}) == 1);
  CHECK(count(db, match, {{std::string("memory OR compute")}, {}}) == 2);
  db.exec("UPDATE lessons SET text = 'nothing here' WHERE id = 1", {});
  CHECK(count(db, match, {{std::string("dram")}, {}}) == 0);
  db.exec("DELETE FROM lessons WHERE id = 2", {});
  CHECK(count(db, match, {{std::string("tensor")}, {}}) == 0);
  db.exec("INSERT INTO lessons_fts(lessons_fts) VALUES ('integrity-check')", {});
}

TEST_CASE("a closed store refuses calls", "[store]") {
  TempDir dir;
  MemoryStore db(dir.file("k.db"));
  db.close();
  CHECK_FALSE(db.is_open());
  CHECK_THROWS_AS(db.exec("SELECT 1", {}), DbError);
}

TEST_CASE("an unwritable path fails to open", "[store]") {
  CHECK_THROWS_AS(MemoryStore("/nonexistent-dir/x/k.db"), DbError);
}

TEST_CASE("exec reports the rows this call changed, not an earlier statement's", "[store]") {
  TempDir dir;
  MemoryStore db(dir.file("k.db"));
  CHECK(db.exec("INSERT INTO llm_cache(key, created) VALUES ('a', 1), ('b', 1)", {}).changes == 2);
  CHECK(db.exec("CREATE TABLE t(x)", {}).changes == 0);
  CHECK(db.exec_script("CREATE TABLE u(x); CREATE TABLE v(x);").changes == 0);
  CHECK(db.exec("DELETE FROM llm_cache", {}).changes == 2);
  // A lesson insert also writes its FTS row through a trigger; only the lesson counts.
  CHECK(db.exec("INSERT INTO lessons(text, created) VALUES ('x', 1)", {}).changes == 1);
}

TEST_CASE("named values can come from a lookup, only for the names the statement uses", "[store]") {
  TempDir dir;
  MemoryStore db(dir.file("k.db"));
  std::vector<std::string> asked;
  Params p;
  p.lookup = [&](const char* name, Value& out) {
    asked.emplace_back(name);
    if (std::string(name) == "key") out = std::string("k1");
    else if (std::string(name) == "created") out = 3.0;
    else return false;
    return true;
  };
  db.exec("INSERT INTO llm_cache(key, request, created) VALUES (:key, :request, :created)", p);
  CHECK(asked == std::vector<std::string>{"key", "request", "created"});
  CHECK(count(db, "SELECT count(*) FROM llm_cache WHERE key = 'k1' AND request IS NULL AND created = 3") == 1);
}
