#include "store/schema.hpp"

#include <string>

namespace kagent::store {
namespace {

// Version 1: short-term trajectory, long-term knowledge, LLM cache. JSON columns hold text
// produced by kagent.json; times are Unix seconds.
constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE runs(
  id INTEGER PRIMARY KEY,
  problem TEXT, problem_hash TEXT, gpu TEXT, policy TEXT, config TEXT,
  started REAL NOT NULL, finished REAL,
  status TEXT NOT NULL DEFAULT 'running', summary TEXT);
CREATE INDEX runs_by_problem ON runs(problem_hash, gpu);

CREATE TABLE rounds(
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  round INTEGER NOT NULL, parents TEXT, notes TEXT, best_attempt INTEGER,
  started REAL NOT NULL, finished REAL,
  UNIQUE(run_id, round));

CREATE TABLE attempts(
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  round INTEGER,
  parent_id INTEGER REFERENCES attempts(id) ON DELETE SET NULL,
  worker TEXT, role TEXT, strategy TEXT, skill TEXT, plan_signature TEXT,
  prompt_path TEXT, reply_path TEXT, source_path TEXT, source_hash TEXT, fingerprint TEXT,
  stage TEXT, error_signature TEXT, correct INTEGER,
  time_ms REAL, speedup_vs_eager REAL, speedup_vs_compile REAL, metrics TEXT,
  created REAL NOT NULL);
-- Few indexes on purpose: each commit rewrites one leaf page per index, and attempts are the
-- hot write path. A parent has few children, so (parent_id, id) serves "what was tried from this
-- parent" by scanning them; the best attempt scans one run.
CREATE INDEX attempts_by_run ON attempts(run_id, id);
CREATE INDEX attempts_by_parent ON attempts(parent_id, id);
CREATE INDEX attempts_by_fingerprint ON attempts(fingerprint) WHERE fingerprint IS NOT NULL;

CREATE TABLE reflexions(
  id INTEGER PRIMARY KEY,
  attempt_id INTEGER NOT NULL REFERENCES attempts(id) ON DELETE CASCADE,
  diagnosis_correct INTEGER, fix_effective INTEGER,
  lessons TEXT, avoid TEXT, try TEXT, text TEXT,
  created REAL NOT NULL);
CREATE INDEX reflexions_by_attempt ON reflexions(attempt_id);

CREATE TABLE skills(
  name TEXT PRIMARY KEY,
  category TEXT, intent TEXT, source_path TEXT,
  registered REAL NOT NULL, updated REAL NOT NULL);

CREATE TABLE skill_outcomes(
  id INTEGER PRIMARY KEY,
  skill TEXT NOT NULL REFERENCES skills(name) ON DELETE CASCADE,
  bottleneck TEXT, op_class TEXT, gpu TEXT,
  success INTEGER NOT NULL, gain REAL,
  run_id INTEGER, attempt_id INTEGER,
  created REAL NOT NULL);
CREATE INDEX skill_outcomes_by_skill ON skill_outcomes(skill, bottleneck, op_class, gpu);

CREATE TABLE lessons(
  id INTEGER PRIMARY KEY,
  text TEXT NOT NULL, tags TEXT,
  problem_hash TEXT, gpu TEXT, source_attempt INTEGER,
  created REAL NOT NULL);
CREATE INDEX lessons_by_problem ON lessons(problem_hash, gpu);
-- An external-content index: the text lives once, in `lessons`; triggers keep the index true.
CREATE VIRTUAL TABLE lessons_fts USING fts5(text, tags, content='lessons', content_rowid='id');
CREATE TRIGGER lessons_ai AFTER INSERT ON lessons BEGIN
  INSERT INTO lessons_fts(rowid, text, tags) VALUES (new.id, new.text, new.tags);
END;
CREATE TRIGGER lessons_ad AFTER DELETE ON lessons BEGIN
  INSERT INTO lessons_fts(lessons_fts, rowid, text, tags) VALUES ('delete', old.id, old.text, old.tags);
END;
CREATE TRIGGER lessons_au AFTER UPDATE ON lessons BEGIN
  INSERT INTO lessons_fts(lessons_fts, rowid, text, tags) VALUES ('delete', old.id, old.text, old.tags);
  INSERT INTO lessons_fts(rowid, text, tags) VALUES (new.id, new.text, new.tags);
END;

CREATE TABLE archive(
  id INTEGER PRIMARY KEY,
  problem_hash TEXT NOT NULL, gpu TEXT NOT NULL, dtype TEXT NOT NULL DEFAULT 'fp32',
  source TEXT NOT NULL, source_hash TEXT,
  time_ms REAL NOT NULL, speedup_vs_eager REAL, speedup_vs_compile REAL, metrics TEXT,
  run_id INTEGER, attempt_id INTEGER,
  created REAL NOT NULL);
CREATE INDEX archive_best ON archive(problem_hash, gpu, dtype, time_ms);

CREATE TABLE llm_cache(
  key TEXT PRIMARY KEY,
  request TEXT, response TEXT,
  created REAL NOT NULL);
)sql";

constexpr Migration kMigrations[] = {
    {1, kSchemaV1},
};

}  // namespace

std::span<const Migration> schema_migrations() { return kMigrations; }

int latest_schema_version() { return kMigrations[std::size(kMigrations) - 1].version; }

int apply_migrations(Connection& conn, std::span<const Migration> migrations,
                     const std::string& label) {
  const int latest = migrations.empty() ? 0 : migrations.back().version;
  int version = static_cast<int>(conn.query_int("PRAGMA user_version"));
  if (version > latest) {
    throw DbError(SQLITE_ERROR, "database " + label + " has schema version " +
                                    std::to_string(version) +
                                    ", newer than this kagent-rt supports (" +
                                    std::to_string(latest) + "); use a newer kagent-rt");
  }
  for (const Migration& m : migrations) {
    if (m.version <= version) continue;
    // IMMEDIATE takes the write lock first, so two processes opening a fresh file at once
    // cannot both run the same migration; the re-read below sees the winner's work.
    conn.exec_script("BEGIN IMMEDIATE");
    try {
      const int now = static_cast<int>(conn.query_int("PRAGMA user_version"));
      if (now < m.version) {
        conn.exec_script(m.sql);
        conn.exec_script("PRAGMA user_version = " + std::to_string(m.version));
      }
      conn.exec_script("COMMIT");
    } catch (const DbError& e) {
      sqlite3_exec(conn.get(), "ROLLBACK", nullptr, nullptr, nullptr);
      throw DbError(e.sqlite_code(), "migration to schema version " + std::to_string(m.version) +
                                         " failed: " + e.what());
    }
    version = m.version;
  }
  return version;
}

}  // namespace kagent::store
