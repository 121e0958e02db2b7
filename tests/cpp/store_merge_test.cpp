// merge_database on real SQLite files: rows copied once, references rewritten, idempotence,
// resumed sources, seeded copies, rows without uids, and refusals.
#include <catch2/catch.hpp>
#include <filesystem>
#include <set>
#include <string>

#include "store/memory_store.hpp"
#include "store/merge.hpp"
#include "store/schema.hpp"
#include "store_test_util.hpp"

namespace fs = std::filesystem;
using kagent::store::Connection;
using kagent::store::DbError;
using kagent::store::MemoryStore;
using kagent::store::merge_database;
using kagent::store::MergeCounts;
using kagent::store::Params;
using kagent::store::Statement;
using kagent::store::Value;
using kagent::store::testing::count;
using kagent::store::testing::TempDir;

namespace {

Params args(std::initializer_list<Value> values) {
  Params p;
  p.positional.assign(values);
  return p;
}

std::set<std::string> column_set(MemoryStore& db, const std::string& sql) {
  std::set<std::string> out;
  db.query(sql, {}, [&](const Statement& st) {
    const Value v = st.column(0);
    out.insert(std::holds_alternative<std::string>(v) ? std::get<std::string>(v) : "NULL");
  });
  return out;
}

int64_t added(const MergeCounts& c, const std::string& table) {
  for (const auto& [t, n] : c) {
    if (t == table) return n;
  }
  FAIL("no count for " << table);
  return -1;
}

int64_t total_added(const MergeCounts& c) {
  int64_t n = 0;
  for (const auto& [t, k] : c) n += k;
  return n;
}

// One run as an agent writes it, by hand (no uids given: the triggers make them): the input
// attempt and a child, a reflexion, a skill outcome, a lesson, an archived kernel, a round, an
// LLM reply and the usage row of that call. `tag` makes the texts distinct.
int64_t write_run(MemoryStore& db, const std::string& tag, bool finish = true) {
  db.exec("INSERT INTO runs(problem, started) VALUES (?, 1.0)", args({tag}));
  const int64_t run = count(db, "SELECT max(id) FROM runs");
  db.exec("INSERT INTO attempts(run_id, round, role, created) VALUES (?, 0, 'input', 1.0)",
          args({run}));
  const int64_t input = count(db, "SELECT max(id) FROM attempts");
  db.exec("INSERT INTO attempts(run_id, round, parent_id, role, source_hash, created) "
          "VALUES (?, 1, ?, 'optimizer', ?, 2.0)",
          args({run, input, "src-" + tag}));
  const int64_t child = count(db, "SELECT max(id) FROM attempts");
  db.exec("INSERT INTO reflexions(attempt_id, text, created) VALUES (?, ?, 2.0)",
          args({child, "reflexion " + tag}));
  db.exec("INSERT INTO skills(name, registered, updated) VALUES ('fusion', 1.0, 1.0) "
          "ON CONFLICT(name) DO NOTHING",
          {});
  db.exec("INSERT INTO skill_outcomes(skill, success, gain, run_id, attempt_id, created) "
          "VALUES ('fusion', 1, 1.5, ?, ?, 2.0)",
          args({run, child}));
  db.exec("INSERT INTO lessons(text, source_attempt, created) VALUES (?, ?, 2.0)",
          args({"lesson" + tag + " word", child}));
  db.exec("INSERT INTO archive(problem_hash, gpu, source, time_ms, run_id, attempt_id, created) "
          "VALUES (?, 'cpu', 'code', 1.0, ?, ?, 2.0)",
          args({"h-" + tag, run, child}));
  db.exec("INSERT INTO rounds(run_id, round, parents, best_attempt, started, finished) "
          "VALUES (?, 1, json_array(?), ?, 1.0, 2.0)",
          args({run, input, child}));
  db.exec("INSERT INTO llm_cache(key, request, response, created) VALUES (?, 'q', 'a', 1.0)",
          args({"key-" + tag}));
  db.exec("INSERT INTO llm_calls(run_id, seq, role, place, input_tokens, created) "
          "VALUES (?, 1, 'optimize', ?, 10, 2.0)",
          args({run, "place-" + tag}));
  if (finish) {
    db.exec("UPDATE runs SET status = 'done', finished = 3.0 WHERE id = ?", args({run}));
  }
  return run;
}

}  // namespace

TEST_CASE("merging copies every row once and rewrites the references", "[store][merge]") {
  TempDir dir;
  {
    MemoryStore a(dir.file("a.db"));
    write_run(a, "A");
    MemoryStore b(dir.file("b.db"));
    write_run(b, "B");
  }
  MemoryStore t(dir.file("t.db"));
  write_run(t, "T");
  const MergeCounts ca = merge_database(t, dir.file("a.db"));
  for (const char* table : {"runs", "rounds", "reflexions", "skill_outcomes", "lessons", "archive",
                            "llm_cache", "llm_calls"}) {
    INFO(table);
    CHECK(added(ca, table) == 1);
  }
  CHECK(added(ca, "attempts") == 2);
  CHECK(added(ca, "skills") == 0);  // the same skill by name
  merge_database(t, dir.file("b.db"));

  CHECK(count(t, "SELECT count(*) FROM runs") == 3);
  CHECK(count(t, "SELECT count(*) FROM attempts") == 6);
  // Each child's parent is its own run's input attempt, and every reference lands in its run.
  CHECK(count(t, "SELECT count(*) FROM attempts c JOIN attempts p ON p.id = c.parent_id "
                 "WHERE p.run_id = c.run_id AND p.role = 'input' AND c.role = 'optimizer'") == 3);
  CHECK(count(t, "SELECT count(*) FROM reflexions r JOIN attempts a ON a.id = r.attempt_id "
                 "JOIN runs u ON u.id = a.run_id "
                 "WHERE r.text = 'reflexion ' || u.problem") == 3);
  CHECK(count(t, "SELECT count(*) FROM skill_outcomes o JOIN attempts a ON a.id = o.attempt_id "
                 "WHERE a.run_id = o.run_id") == 3);
  CHECK(count(t, "SELECT count(*) FROM lessons l JOIN attempts a ON a.id = l.source_attempt "
                 "JOIN runs u ON u.id = a.run_id WHERE l.text = 'lesson' || u.problem || ' word'") == 3);
  CHECK(count(t, "SELECT count(*) FROM archive k JOIN attempts a ON a.id = k.attempt_id "
                 "JOIN runs u ON u.id = k.run_id WHERE a.run_id = k.run_id "
                 "AND k.problem_hash = 'h-' || u.problem") == 3);
  CHECK(count(t, "SELECT count(*) FROM rounds r JOIN attempts b ON b.id = r.best_attempt "
                 "JOIN attempts p ON p.id = json_extract(r.parents, '$[0]') "
                 "WHERE b.run_id = r.run_id AND p.run_id = r.run_id AND p.role = 'input'") == 3);
  CHECK(column_set(t, "SELECT key FROM llm_cache") ==
        std::set<std::string>{"key-A", "key-B", "key-T"});
  // Each call's usage row follows its run.
  CHECK(count(t, "SELECT count(*) FROM llm_calls c JOIN runs u ON u.id = c.run_id "
                 "WHERE c.place = 'place-' || u.problem") == 3);
  // Merged lessons are in the full-text index.
  CHECK(count(t, "SELECT count(*) FROM lessons_fts WHERE lessons_fts MATCH 'lessonB'") == 1);
  CHECK(count(t, "SELECT count(*) FROM pragma_foreign_key_check") == 0);
  CHECK(count(t, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check != 'ok'") == 0);

  SECTION("merging the same files again adds nothing") {
    CHECK(total_added(merge_database(t, dir.file("a.db"))) == 0);
    CHECK(total_added(merge_database(t, dir.file("b.db"))) == 0);
    CHECK(count(t, "SELECT count(*) FROM attempts") == 6);
  }
}

TEST_CASE("a source that went on after a merge gives only its new rows and its run's end",
          "[store][merge]") {
  TempDir dir;
  int64_t run = 0;
  {
    MemoryStore s(dir.file("s.db"));
    run = write_run(s, "S", /*finish=*/false);
  }
  MemoryStore t(dir.file("t.db"));
  merge_database(t, dir.file("s.db"));
  CHECK(count(t, "SELECT count(*) FROM runs WHERE status = 'running' AND finished IS NULL") == 1);
  {
    // the task is resubmitted, resumes its run and finishes it
    MemoryStore s(dir.file("s.db"));
    s.exec("INSERT INTO attempts(run_id, round, role, created) VALUES (?, 2, 'optimizer', 4.0)",
           args({run}));
    s.exec("UPDATE runs SET status = 'done', finished = 5.0, summary = '{}' WHERE id = ?",
           args({run}));
  }
  const MergeCounts c = merge_database(t, dir.file("s.db"));
  CHECK(added(c, "attempts") == 1);
  CHECK(added(c, "runs") == 0);
  CHECK(count(t, "SELECT count(*) FROM runs WHERE status = 'done' AND finished = 5.0") == 1);
  CHECK(count(t, "SELECT count(*) FROM attempts WHERE round = 2") == 1);
}

TEST_CASE("a copy seeded from the target merges back without doubling or reverting rows",
          "[store][merge]") {
  TempDir dir;
  MemoryStore t(dir.file("t.db"));
  const int64_t old_run = write_run(t, "T", /*finish=*/false);
  t.exec("VACUUM INTO ?", args({dir.file("seed.db")}));
  // The target's run finishes after the copy was taken...
  t.exec("UPDATE runs SET status = 'done', finished = 9.0 WHERE id = ?", args({old_run}));
  {
    // ...while the copy gets a run of its own.
    MemoryStore s(dir.file("seed.db"));
    write_run(s, "S");
  }
  const MergeCounts c = merge_database(t, dir.file("seed.db"));
  CHECK(added(c, "runs") == 1);
  CHECK(added(c, "attempts") == 2);
  CHECK(added(c, "llm_cache") == 1);
  CHECK(count(t, "SELECT count(*) FROM runs") == 2);
  CHECK(count(t, "SELECT count(*) FROM runs WHERE id = ? AND status = 'done' AND finished = 9.0",
              args({old_run})) == 1);
}

TEST_CASE("rows get a uid on insert and the uid is unique", "[store][merge]") {
  TempDir dir;
  MemoryStore db(dir.file("k.db"));
  write_run(db, "U");
  for (const char* table :
       {"runs", "attempts", "reflexions", "skill_outcomes", "lessons", "archive", "llm_calls"}) {
    INFO(table);
    CHECK(count(db, std::string("SELECT count(*) FROM ") + table + " WHERE uid IS NULL") == 0);
  }
  const std::string uid = *column_set(db, "SELECT uid FROM runs").begin();
  REQUIRE_THROWS_AS(db.exec("INSERT INTO runs(problem, started, uid) VALUES ('x', 1.0, ?)",
                            args({uid})),
                    DbError);
  // A uid cleared by hand is made again before rows are matched.
  db.exec("UPDATE attempts SET uid = NULL", {});
  {
    MemoryStore other(dir.file("o.db"));
    write_run(other, "O");
  }
  merge_database(db, dir.file("o.db"));
  CHECK(count(db, "SELECT count(*) FROM attempts WHERE uid IS NULL") == 0);
  CHECK(count(db, "SELECT count(DISTINCT uid) FROM attempts") == 4);
}

TEST_CASE("a version 1 database gets uids when it is migrated", "[store][merge]") {
  TempDir dir;
  {
    Connection c(dir.file("v1.db"));
    const auto all = kagent::store::schema_migrations();
    kagent::store::apply_migrations(c, all.first(1), "v1.db");
    c.exec_script(
        "INSERT INTO runs(problem, started) VALUES ('old', 1.0);"
        "INSERT INTO attempts(run_id, role, created) VALUES (1, 'input', 1.0);"
        "INSERT INTO attempts(run_id, role, created) VALUES (1, 'optimizer', 1.0);"
        "INSERT INTO lessons(text, created) VALUES ('kept in the index', 1.0);");
  }
  MemoryStore db(dir.file("v1.db"));
  CHECK(db.schema_version() == kagent::store::latest_schema_version());
  CHECK(count(db, "SELECT count(DISTINCT uid) FROM attempts") == 2);
  CHECK(count(db, "SELECT count(*) FROM lessons_fts WHERE lessons_fts MATCH 'index'") == 1);
  MemoryStore t(dir.file("t.db"));
  CHECK(added(merge_database(t, dir.file("v1.db")), "attempts") == 2);
}

TEST_CASE("merging refuses itself, a missing file, a newer schema and an open transaction",
          "[store][merge]") {
  TempDir dir;
  MemoryStore t(dir.file("t.db"));
  CHECK_THROWS_WITH(merge_database(t, dir.file("t.db")), Catch::Contains("this database itself"));
  CHECK_THROWS_WITH(merge_database(t, dir.file("none.db")), Catch::Contains("no database file"));
  CHECK_FALSE(fs::exists(dir.file("none.db")));
  {
    Connection c(dir.file("new.db"));
    c.exec_script("PRAGMA user_version = 99");
  }
  CHECK_THROWS_WITH(merge_database(t, dir.file("new.db")), Catch::Contains("newer than"));
  {
    MemoryStore s(dir.file("s.db"));
  }
  t.exec_script("BEGIN");
  CHECK_THROWS_WITH(merge_database(t, dir.file("s.db")), Catch::Contains("transaction"));
  t.exec_script("ROLLBACK");
  // A failed merge leaves nothing attached: the next one works.
  CHECK(total_added(merge_database(t, dir.file("s.db"))) == 0);
}

TEST_CASE("every table and column of the schema is merged", "[store][merge]") {
  TempDir dir;
  MemoryStore db(dir.file("k.db"));
  const std::set<std::string> schema = column_set(
      db,
      "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
      "AND name NOT LIKE 'lessons_fts%'");
  std::set<std::string> merged;
  for (const auto& [table, cols] : kagent::store::merged_columns()) {
    INFO(table);
    merged.insert(table);
    std::set<std::string> have = column_set(
        db, "SELECT name FROM pragma_table_info('" + table + "') WHERE name != 'id'");
    CHECK(have == std::set<std::string>(cols.begin(), cols.end()));
  }
  CHECK(schema == merged);
}
