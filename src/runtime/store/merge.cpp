#include "store/merge.hpp"

#include <filesystem>
#include <string_view>

namespace kagent::store {
namespace {

constexpr const char* kSource = "merge_src";

// A column of the target and the expression (over the source row `s`) that fills it.
struct Column {
  const char* name;
  const char* expr = nullptr;  // nullptr: s.<name>
};

// How one table merges. References to other tables' integer ids go through the temp maps
// (source id -> target id) that the tables merged before them filled.
struct TableMerge {
  const char* table;
  std::vector<Column> columns;
  const char* where;        // rows taken from the source ("1": all)
  const char* conflict;     // ON CONFLICT target and action
  const char* map = nullptr;  // temp map to fill after the insert, matched on uid
};

// Source id -> target id, for a column that refers to a run or an attempt (NULL when the
// referenced row does not exist in the source either).
#define KAGENT_MAP(map, col) "(SELECT dst FROM temp.merge_" map " WHERE src = s." col ")"

// The order matters: a table comes after the tables it refers to.
const std::vector<TableMerge>& merges() {
  static const std::vector<TableMerge> m = {
      {"runs",
       {{"uid"}, {"problem"}, {"problem_hash"}, {"gpu"}, {"policy"}, {"config"}, {"started"},
        {"finished"}, {"status"}, {"summary"}},
       "1",
       // A run resumed and finished in the source after an earlier merge: its end comes over.
       "ON CONFLICT(uid) DO UPDATE SET (finished, status, summary) = "
       "(excluded.finished, excluded.status, excluded.summary) "
       "WHERE excluded.finished IS NOT NULL AND "
       "(runs.finished IS NULL OR excluded.finished > runs.finished)",
       "runs"},
      // parent_id refers to the same table: set by a second pass once every attempt has an id.
      {"attempts",
       {{"uid"}, {"run_id", KAGENT_MAP("runs", "run_id")}, {"parent_id", "NULL"}, {"round"},
        {"worker"}, {"role"},
        {"strategy"}, {"skill"}, {"plan_signature"}, {"prompt_path"}, {"reply_path"},
        {"source_path"}, {"source_hash"}, {"fingerprint"}, {"stage"}, {"error_signature"},
        {"correct"}, {"time_ms"}, {"speedup_vs_eager"}, {"speedup_vs_compile"}, {"metrics"},
        {"created"}},
       "s.run_id IN (SELECT src FROM temp.merge_runs)",
       "ON CONFLICT(uid) DO NOTHING",
       "attempts"},
      {"rounds",
       {{"run_id", KAGENT_MAP("runs", "run_id")}, {"round"},
        // parents: a JSON array of attempt ids, rewritten element by element
        {"parents",
         "CASE WHEN json_valid(s.parents) AND json_type(s.parents) = 'array' THEN "
         "(SELECT json_group_array(m.dst) FROM json_each(s.parents) j "
         "JOIN temp.merge_attempts m ON m.src = j.value) ELSE s.parents END"},
        {"notes"},
        {"best_attempt", KAGENT_MAP("attempts", "best_attempt")},
        {"started"},
        {"finished"}},
       "s.run_id IN (SELECT src FROM temp.merge_runs)",
       "ON CONFLICT(run_id, round) DO UPDATE SET (parents, notes, best_attempt, finished) = "
       "(excluded.parents, excluded.notes, excluded.best_attempt, excluded.finished) "
       "WHERE excluded.finished IS NOT NULL AND "
       "(rounds.finished IS NULL OR excluded.finished > rounds.finished)"},
      {"reflexions",
       {{"uid"}, {"attempt_id", KAGENT_MAP("attempts", "attempt_id")}, {"diagnosis_correct"},
        {"fix_effective"}, {"lessons"}, {"avoid"}, {"try"}, {"text"}, {"created"}},
       "s.attempt_id IN (SELECT src FROM temp.merge_attempts)",
       "ON CONFLICT(uid) DO NOTHING"},
      {"skills",
       {{"name"}, {"category"}, {"intent"}, {"source_path"}, {"registered"}, {"updated"}},
       "1",
       "ON CONFLICT(name) DO UPDATE SET (category, intent, source_path, updated) = "
       "(excluded.category, excluded.intent, excluded.source_path, excluded.updated) "
       "WHERE excluded.updated > skills.updated"},
      {"skill_outcomes",
       {{"uid"}, {"skill"}, {"bottleneck"}, {"op_class"}, {"gpu"}, {"success"}, {"gain"},
        {"run_id", KAGENT_MAP("runs", "run_id")},
        {"attempt_id", KAGENT_MAP("attempts", "attempt_id")},
        {"created"}},
       "1",
       "ON CONFLICT(uid) DO NOTHING"},
      {"lessons",
       {{"uid"}, {"text"}, {"tags"}, {"problem_hash"}, {"gpu"},
        {"source_attempt", KAGENT_MAP("attempts", "source_attempt")},
        {"created"}},
       "1",
       "ON CONFLICT(uid) DO NOTHING"},
      {"archive",
       {{"uid"}, {"problem_hash"}, {"gpu"}, {"dtype"}, {"source"}, {"source_hash"}, {"time_ms"},
        {"speedup_vs_eager"}, {"speedup_vs_compile"}, {"metrics"},
        {"run_id", KAGENT_MAP("runs", "run_id")},
        {"attempt_id", KAGENT_MAP("attempts", "attempt_id")},
        {"created"}},
       "1",
       "ON CONFLICT(uid) DO NOTHING"},
      {"llm_calls",
       {{"uid"}, {"run_id", KAGENT_MAP("runs", "run_id")}, {"seq"}, {"role"}, {"place"},
        {"provider"}, {"model"}, {"input_tokens"}, {"output_tokens"}, {"cache_read_tokens"},
        {"cache_write_tokens"}, {"cost_usd"}, {"latency"}, {"replayed"}, {"outcome"},
        {"replay_key"}, {"created"}},
       "s.run_id IN (SELECT src FROM temp.merge_runs)",
       "ON CONFLICT(uid) DO NOTHING"},
      {"llm_cache",
       {{"key"}, {"request"}, {"response"}, {"created"}},
       "1",
       "ON CONFLICT(key) DO NOTHING"},
      // a measurement taken later in the source replaces this database's of the same key
      {"measurements",
       {{"kind"}, {"key"}, {"value"}, {"created"}},
       "1",
       "ON CONFLICT(kind, key) DO UPDATE SET (value, created) = (excluded.value, excluded.created) "
       "WHERE excluded.created > measurements.created"},
  };
  return m;
}

#undef KAGENT_MAP

bool has_uid(const TableMerge& t) {
  for (const Column& c : t.columns) {
    if (std::string_view(c.name) == "uid") return true;
  }
  return false;
}

std::string insert_sql(const TableMerge& t) {
  std::string cols, exprs;
  for (const Column& c : t.columns) {
    if (!cols.empty()) {
      cols += ", ";
      exprs += ", ";
    }
    cols += c.name;
    exprs += c.expr ? std::string(c.expr) : std::string("s.") + c.name;
  }
  // "WHERE" always: without it SQLite would read ON CONFLICT as a join constraint.
  return std::string("INSERT INTO main.") + t.table + "(" + cols + ") SELECT " + exprs +
         " FROM " + kSource + "." + t.table + " s WHERE " + t.where + " ORDER BY s.rowid " +
         t.conflict;
}

int64_t count_rows(MemoryStore& db, const std::string& table) {
  int64_t n = 0;
  db.query("SELECT count(*) FROM main." + table, {},
           [&](const Statement& st) { n = std::get<int64_t>(st.column(0)); });
  return n;
}

// Detaches the source (after rolling back a merge that failed) whatever happens.
class Attached {
 public:
  Attached(MemoryStore& db, const std::string& path) : db_(db) {
    Params p;
    p.positional.push_back(path);
    db_.exec(std::string("ATTACH DATABASE ? AS ") + kSource, p);
  }
  ~Attached() {
    try {
      if (db_.in_transaction()) db_.exec_script("ROLLBACK");
      db_.exec_script(
          "DROP TABLE IF EXISTS temp.merge_runs; DROP TABLE IF EXISTS temp.merge_attempts;");
      db_.exec_script(std::string("DETACH DATABASE ") + kSource);
    } catch (const DbError&) {
      // the connection stays usable; the attachment goes when it closes
    }
  }
  Attached(const Attached&) = delete;
  Attached& operator=(const Attached&) = delete;

 private:
  MemoryStore& db_;
};

}  // namespace

std::vector<std::pair<std::string, std::vector<std::string>>> merged_columns() {
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  for (const TableMerge& t : merges()) {
    std::vector<std::string> cols;
    for (const Column& c : t.columns) cols.emplace_back(c.name);
    out.emplace_back(t.table, std::move(cols));
  }
  return out;
}

MergeCounts merge_database(MemoryStore& into, const std::string& source_path) {
  namespace fs = std::filesystem;
  if (into.in_transaction()) {
    throw DbError(SQLITE_MISUSE, "cannot merge inside a transaction");
  }
  std::error_code ec;
  if (!fs::is_regular_file(source_path, ec)) {
    throw DbError(SQLITE_CANTOPEN, "merge: no database file at " + source_path);
  }
  if (fs::exists(into.path(), ec) && fs::equivalent(into.path(), source_path, ec)) {
    throw DbError(SQLITE_ERROR, "merge: " + source_path + " is this database itself");
  }
  // Opening migrates the source to this build's schema (so its tables have the uid columns),
  // and refuses one from a newer build.
  { MemoryStore source(source_path); }

  Attached attached(into, source_path);
  into.exec_script("BEGIN IMMEDIATE");
  // Rows inserted by hand with no uid get one now, on both sides, before rows are matched.
  for (const TableMerge& t : merges()) {
    if (!has_uid(t)) continue;
    for (const char* schema : {"main", kSource}) {
      into.exec_script(std::string("UPDATE ") + schema + "." + t.table +
                       " SET uid = lower(hex(randomblob(16))) WHERE uid IS NULL");
    }
  }
  into.exec_script(
      "DROP TABLE IF EXISTS temp.merge_runs; DROP TABLE IF EXISTS temp.merge_attempts;"
      "CREATE TEMP TABLE merge_runs(src INTEGER PRIMARY KEY, dst INTEGER NOT NULL);"
      "CREATE TEMP TABLE merge_attempts(src INTEGER PRIMARY KEY, dst INTEGER NOT NULL);");
  MergeCounts counts;
  for (const TableMerge& t : merges()) {
    const int64_t before = count_rows(into, t.table);
    into.exec_script(insert_sql(t));
    if (t.map != nullptr) {
      into.exec_script(std::string("INSERT INTO temp.merge_") + t.map + " SELECT s.id, m.id FROM " +
                       kSource + "." + t.table + " s JOIN main." + t.table + " m ON m.uid = s.uid");
    }
    if (std::string_view(t.table) == "attempts") {
      into.exec_script(std::string(
                           "UPDATE main.attempts SET parent_id = p.dst FROM ") +
                       kSource +
                       ".attempts s JOIN temp.merge_attempts c ON c.src = s.id "
                       "JOIN temp.merge_attempts p ON p.src = s.parent_id "
                       "WHERE main.attempts.id = c.dst AND main.attempts.parent_id IS NULL");
    }
    counts.emplace_back(t.table, count_rows(into, t.table) - before);
  }
  into.exec_script("COMMIT");
  return counts;
}

}  // namespace kagent::store
