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

// Version 2: a uid on every row that records an event (runs, attempts, reflexions, skill
// outcomes, lessons, archived kernels). Integer ids are local to one file; the uid is made when
// the row is written and travels with it, so databases written apart (one per Slurm task) merge
// without lost or doubled rows (store/merge.cpp). The typed inserts of kagent.mem set it; the
// triggers fill it for rows inserted by hand. Rows keyed by their content need none: skills by
// name, LLM replies by request key, rounds by (run, round).
constexpr const char* kSchemaV2 = R"sql(
ALTER TABLE runs ADD COLUMN uid TEXT;
ALTER TABLE attempts ADD COLUMN uid TEXT;
ALTER TABLE reflexions ADD COLUMN uid TEXT;
ALTER TABLE skill_outcomes ADD COLUMN uid TEXT;
ALTER TABLE lessons ADD COLUMN uid TEXT;
ALTER TABLE archive ADD COLUMN uid TEXT;
UPDATE runs SET uid = lower(hex(randomblob(16)));
UPDATE attempts SET uid = lower(hex(randomblob(16)));
UPDATE reflexions SET uid = lower(hex(randomblob(16)));
UPDATE skill_outcomes SET uid = lower(hex(randomblob(16)));
UPDATE archive SET uid = lower(hex(randomblob(16)));
-- The FTS index holds text and tags only: a uid change must not rewrite it.
DROP TRIGGER lessons_au;
CREATE TRIGGER lessons_au AFTER UPDATE OF text, tags ON lessons BEGIN
  INSERT INTO lessons_fts(lessons_fts, rowid, text, tags) VALUES ('delete', old.id, old.text, old.tags);
  INSERT INTO lessons_fts(rowid, text, tags) VALUES (new.id, new.text, new.tags);
END;
UPDATE lessons SET uid = lower(hex(randomblob(16)));
CREATE UNIQUE INDEX runs_by_uid ON runs(uid);
CREATE UNIQUE INDEX attempts_by_uid ON attempts(uid);
CREATE UNIQUE INDEX reflexions_by_uid ON reflexions(uid);
CREATE UNIQUE INDEX skill_outcomes_by_uid ON skill_outcomes(uid);
CREATE UNIQUE INDEX lessons_by_uid ON lessons(uid);
CREATE UNIQUE INDEX archive_by_uid ON archive(uid);
CREATE TRIGGER runs_uid AFTER INSERT ON runs WHEN new.uid IS NULL BEGIN
  UPDATE runs SET uid = lower(hex(randomblob(16))) WHERE id = new.id;
END;
CREATE TRIGGER attempts_uid AFTER INSERT ON attempts WHEN new.uid IS NULL BEGIN
  UPDATE attempts SET uid = lower(hex(randomblob(16))) WHERE id = new.id;
END;
CREATE TRIGGER reflexions_uid AFTER INSERT ON reflexions WHEN new.uid IS NULL BEGIN
  UPDATE reflexions SET uid = lower(hex(randomblob(16))) WHERE id = new.id;
END;
CREATE TRIGGER skill_outcomes_uid AFTER INSERT ON skill_outcomes WHEN new.uid IS NULL BEGIN
  UPDATE skill_outcomes SET uid = lower(hex(randomblob(16))) WHERE id = new.id;
END;
CREATE TRIGGER lessons_uid AFTER INSERT ON lessons WHEN new.uid IS NULL BEGIN
  UPDATE lessons SET uid = lower(hex(randomblob(16))) WHERE id = new.id;
END;
CREATE TRIGGER archive_uid AFTER INSERT ON archive WHEN new.uid IS NULL BEGIN
  UPDATE archive SET uid = lower(hex(randomblob(16))) WHERE id = new.id;
END;
)sql";

// Version 3: one row per LLM call of a run (who asked, at which place of the search, what it
// cost, whether the record/replay cache answered it): the per-call usage table of
// agents/run/calls.lua, which also writes it to the run directory as usage.csv.
constexpr const char* kSchemaV3 = R"sql(
CREATE TABLE llm_calls(
  id INTEGER PRIMARY KEY,
  uid TEXT,
  run_id INTEGER REFERENCES runs(id) ON DELETE CASCADE,
  seq INTEGER, role TEXT, place TEXT, provider TEXT, model TEXT,
  input_tokens INTEGER, output_tokens INTEGER, cache_read_tokens INTEGER, cache_write_tokens INTEGER,
  cost_usd REAL, latency REAL, replayed INTEGER, outcome TEXT, replay_key TEXT,
  created REAL NOT NULL);
CREATE INDEX llm_calls_by_run ON llm_calls(run_id, id);
CREATE UNIQUE INDEX llm_calls_by_uid ON llm_calls(uid);
CREATE TRIGGER llm_calls_uid AFTER INSERT ON llm_calls WHEN new.uid IS NULL BEGIN
  UPDATE llm_calls SET uid = lower(hex(randomblob(16))) WHERE id = new.id;
END;
)sql";

// Version 4: figures measured once and reused across runs and sweeps, keyed by what they
// depend on (agents/search/measured.lua builds the keys): a problem's baselines ("baselines") and
// a kernel's confirmation verdicts ("confirmation"). Rows are keyed by their content, so they
// need no uid; a newer measurement of the same key replaces the older one.
constexpr const char* kSchemaV4 = R"sql(
CREATE TABLE measurements(
  kind TEXT NOT NULL, key TEXT NOT NULL,
  value TEXT NOT NULL,
  created REAL NOT NULL,
  PRIMARY KEY(kind, key));
)sql";

constexpr Migration kMigrations[] = {
    {1, kSchemaV1},
    {2, kSchemaV2},
    {3, kSchemaV3},
    {4, kSchemaV4},
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
