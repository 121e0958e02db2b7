---@meta
-- Generated from docs/lua-api.md by scripts/gen_lua_types.lua: do not edit; run
-- `build/kagent-rt scripts/gen_lua_types.lua` after changing the docs.

---@class kagent.mem
local mem = {}

---`mem.SCHEMA_VERSION` — the schema version this build writes.
---@type integer
mem.SCHEMA_VERSION = nil

---`mem.BUSY_WAIT` — the seconds a call waits for another process's lock by default (60).
---@type any
mem.BUSY_WAIT = nil

---**Rows.** Query results are arrays of row tables keyed by column name; SQL `NULL` is an absent
---field. Booleans (`correct`, `success`, `diagnosis_correct`, `fix_effective`) are stored as 1/0 and
---come back as `true`/`false` from the typed functions below (as 1/0 from `db:query`). JSON columns
---(`config`, `summary`, `metrics`, `lessons`, `avoid`, `try`, `tags`, `parents`) come back as JSON
---strings; `mem.decode(row)` decodes them in place. Where a function takes a table value for a
---JSON column, it is encoded with `kagent.json.encode`; a string is stored as is.
---Failures: misuse (wrong argument types, unknown fields, a closed db) raises; SQL errors
---(constraint violations, syntax errors, a locked or unreadable file) return `nil, "EDB: ...", "EDB"`.
---@param row table
---@return any
function mem.decode(row) end

---`mem.open(path, {busy_wait = 60})` → `db`, or `nil, "EDB: ...", "EDB"`. Creates and migrates the
---  database (waiting for a lock as above). `busy_wait`: the seconds a call waits for another
---  process's lock before it fails (a number >= 0).
---  `path` defaults to `mem.default_path()`: the environment variable `KAGENT_DB`, else
---  `runs/kagent.db` under the current directory (its folder is created). `":memory:"` opens a
---  private in-memory database. A database written by a newer kagent-rt (higher `user_version`)
---  fails with `EDB: database <path> has schema version N, newer than this kagent-rt supports (M)`.
---@param path string
---@param opts? table
---@return kagent.mem.Db?
function mem.open(path, opts) end

---`mem.open(path, {busy_wait = 60})` → `db`, or `nil, "EDB: ...", "EDB"`. Creates and migrates the
---  database (waiting for a lock as above). `busy_wait`: the seconds a call waits for another
---  process's lock before it fails (a number >= 0).
---  `path` defaults to `mem.default_path()`: the environment variable `KAGENT_DB`, else
---  `runs/kagent.db` under the current directory (its folder is created). `":memory:"` opens a
---  private in-memory database. A database written by a newer kagent-rt (higher `user_version`)
---  fails with `EDB: database <path> has schema version N, newer than this kagent-rt supports (M)`.
---@return any
function mem.default_path() end

---`mem.decode(row)` → `row` with its JSON columns decoded in place (fields that fail to parse are
---  left as strings). `mem.decode_rows(rows)` → `rows`, each decoded.
---@param rows table[]
---@return any
function mem.decode_rows(rows) end

---@class kagent.mem.Db
local db = {}

---`db:close()` — closes (also done when `db` is collected and at exit). Any later call raises.
---@return any
function db:close() end

---`db:path()` → the file path. `db:schema_version()` → integer.
---@return string
function db:path() end

---`db:path()` → the file path. `db:schema_version()` → integer.
---@return integer
function db:schema_version() end

---`db:exec(sql, params)` → `changes, last_insert_id`. `params` is an array for `?` placeholders or
---  a table for `:name` placeholders (a name missing from the table binds `NULL`; an array with
---  holes can give its length as `n`). Values: `nil`, `kagent.json.null` → `NULL`; booleans → 1/0;
---  integral numbers → INTEGER; other numbers → REAL; strings → TEXT; a table or function raises.
---  `changes` counts the rows this call inserted, updated or deleted (0 for other statements).
---  With `params == nil`, `sql` may hold several statements separated by `;`; with `params`, it
---  must be one statement (more raises).
---@param sql string
---@param params? table
---@return any
function db:exec(sql, params) end

---`db:query(sql, params)` → array of rows (one statement). Statements are prepared once and
---  cached by their text, so pass values as parameters rather than formatting them into the SQL.
---@param sql string
---@param params? table
---@return table[]
function db:query(sql, params) end

---`db:transaction(fn)` → the results of `fn(db)`: runs `fn` inside `BEGIN IMMEDIATE ... COMMIT`,
---  rolls back and re-raises if `fn` raises; a failing `BEGIN` or `COMMIT` (rolled back) returns
---  `nil, err, "EDB"`. `BEGIN` waits for another process's lock as above, before `fn` runs. Calls inside `fn` keep their own convention (`nil, err` is data to `fn`).
---  `fn` runs in a coroutine of its own and must not yield: a ⏸ call inside raises (after rolling
---  back), so no other task's writes can slip into the transaction. Transactions do not nest
---  (raises). Use it to group many writes (it is also much faster).
---@param fn function
---@return any
function db:transaction(fn) end

---`db:start_run{problem, problem_hash, gpu, policy, config}` → `run_id`. `config` is a table
---  (JSON) or string. Status starts as `"running"`.
---@param args table
---@return integer
function db:start_run(args) end

---`db:finish_run(run_id, status, summary)` → `true`. `status` is a string such as `"done"`,
---  `"failed"`, `"stopped"`; `summary` a table or string.
---@param run_id integer
---@param status string
---@param summary? any
---@return any
function db:finish_run(run_id, status, summary) end

---`db:get_run(run_id)` → row or `nil`. `db:runs{problem_hash, gpu, limit = 100}` → rows, newest
---  first.
---@param run_id integer
---@return kagent.mem.Run?
function db:get_run(run_id) end

---`db:get_run(run_id)` → row or `nil`. `db:runs{problem_hash, gpu, limit = 100}` → rows, newest
---  first.
---@param args table
---@return kagent.mem.Run[]
function db:runs(args) end

---`db:add_round{run_id, round, parents, notes}` → round row id (`parents`: array of attempt ids).
---  `db:finish_round(run_id, round, {best_attempt, notes})` → `true`.
---@param args table
---@return any
function db:add_round(args) end

---`db:add_round{run_id, round, parents, notes}` → round row id (`parents`: array of attempt ids).
---  `db:finish_round(run_id, round, {best_attempt, notes})` → `true`.
---@param run_id integer
---@param round any
---@param opts? table
---@return any
function db:finish_round(run_id, round, opts) end

---`db:add_attempt{run_id, round, parent_id, worker, role, strategy, skill, plan_signature,
---  prompt_path, reply_path, source_path, source_hash, fingerprint, stage, error_signature,
---  correct, time_ms, speedup_vs_eager, speedup_vs_compile, metrics}` → `attempt_id`. Only
---  `run_id` is required; `metrics` is a table or JSON string; `correct` a boolean.
---  `parent_id` must be an attempt of this database (or nil for the run's input kernel).
---@param args table
---@return integer
function db:add_attempt(args) end

---`db:update_attempt(id, fields)` → `true`: sets the given fields (same names as above; an
---  unknown name raises).
---@param id integer
---@param fields table
---@return any
function db:update_attempt(id, fields) end

---`db:get_attempt(id)` → attempt row or `nil`.
---@param id integer
---@return kagent.mem.Attempt?
function db:get_attempt(id) end

---`db:add_reflexion{attempt_id, diagnosis_correct, fix_effective, lessons, avoid, try, text}` →
---  `reflexion_id`. `lessons`, `avoid`, `try`: arrays of strings (or JSON strings).
---@param args table
---@return any
function db:add_reflexion(args) end

---`db:attempts_from(parent_id, {run_id})` → the attempts whose parent is `parent_id` (`nil`: the
---  run's root attempts; then `run_id` is required), oldest first.
---@param parent_id integer?
---@param opts? table
---@return kagent.mem.Attempt[]
function db:attempts_from(parent_id, opts) end

---`db:was_tried{parent_id, skill, plan_signature, run_id}` → `true, attempt` (the latest match) or
---  `false`. `parent_id` `nil` matches root attempts; `skill`/`plan_signature`/`run_id` `nil` match
---  any value.
---@param args table
---@return any
function db:was_tried(args) end

---`db:find_fingerprint(run_id, fingerprint)` → the earliest attempt with this compiled-code
---  fingerprint (in that run, or in any run when `run_id` is `nil`), or `nil`.
---@param run_id integer
---@param fingerprint any
---@return kagent.mem.Attempt?
function db:find_fingerprint(run_id, fingerprint) end

---`db:best_attempt(run_id)` → the correct attempt with the lowest `time_ms`, or `nil`.
---@param run_id integer
---@return kagent.mem.Attempt?
function db:best_attempt(run_id) end

---`db:history(run_id, {parent_id, limit = 20})` → array, newest first, of attempt rows (with
---  `metrics` decoded) each with `reflexion` (the attempt's latest reflexion, decoded, or absent).
---  With `parent_id`, only the attempts from that parent. Ready for `kagent.prompt.render`.
---@param run_id integer
---@param opts? table
---@return kagent.mem.Attempt[]
function db:history(run_id, opts) end

---`db:add_llm_call{run_id, seq, role, place, provider, model, input_tokens, output_tokens,
---  cache_read_tokens, cache_write_tokens, cost_usd, latency, replayed, outcome, replay_key}` →
---  id: one LLM call of a run (schema version 3). Only `run_id` is required; `replayed` is a
---  boolean (the record/replay cache answered), `outcome` `"ok"` or the failure's code, `place` the
---  call's place in the run (`policy/round/parent/role/worker/attempt`), `latency` seconds.
---@param args table
---@return any
function db:add_llm_call(args) end

---`db:llm_calls(run_id)` → the run's calls in the order they were recorded (`replayed` as a
---  boolean).
---@param run_id integer
---@return any
function db:llm_calls(run_id) end

---`db:export_run(run_id, path)` → number of lines written, or `nil, err`. Writes JSON lines: one
---  `{"type":"run",...}`, then each attempt `{"type":"attempt",...}` and reflexion
---  `{"type":"reflexion",...}` in id order, JSON columns decoded. The file is written atomically.
---@param run_id integer
---@param path string
---@return any
function db:export_run(run_id, path) end

---`db:register_skill{name, category, intent, source_path}` → `true`. Idempotent: a second call
---  updates the fields.
---@param args table
---@return any
function db:register_skill(args) end

---`db:register_skills(skills)` → count, or `nil, err, "EDB"`: registers an array of skill tables
---  as loaded from `skills/*.lua` (`name`, `category`, `intent`, and `path` or `source_path`; other
---  fields are ignored) in one transaction.
---@param skills table[]
---@return any
function db:register_skills(skills) end

---`db:skills()` → rows (`name, category, intent, source_path`), by name.
---@return any
function db:skills() end

---`db:record_skill_outcome{skill, bottleneck, op_class, gpu, success, gain, run_id, attempt_id}`
---  → outcome id. `skill` and `success` (boolean) are required; an unknown skill is registered.
---  `gain` is the speedup over the parent (e.g. 1.25).
---@param args table
---@return any
function db:record_skill_outcome(args) end

---`db:skill_stats{skill, bottleneck, op_class, gpu}` → array of `{skill, attempts, successes,
---  success_rate, median_gain}` over the recorded outcomes that match every given field (nil =
---  any), best first (success rate, then median gain). `median_gain` is over outcomes with a gain
---  (absent if none).
---@param args table
---@return any
function db:skill_stats(args) end

---`db:add_lesson{text, tags, problem_hash, gpu, source_attempt}` → `lesson_id`. `tags`: array of
---  strings. Indexed for full-text search (SQLite FTS5).
---@param args table
---@return any
function db:add_lesson(args) end

---`db:search_lessons(query, {limit = 10, problem_hash, gpu})` → lesson rows (`id, text, tags`
---  (decoded array), `problem_hash, gpu, source_attempt, created, score`), best match first. The
---  query is free text: punctuation is ignored and a lesson matching any word is a hit (ranked by
---  BM25, so lessons matching more and rarer words come first). A query with no words returns the
---  newest lessons. Both the text and the tags are searched.
---@param query string
---@param opts? table
---@return any
function db:search_lessons(query, opts) end

---`db:lessons{problem_hash, gpu, limit = 50}` → newest lessons first (tags decoded).
---@param args table
---@return any
function db:lessons(args) end

---`db:archive_kernel{problem_hash, gpu, dtype = "fp32", source, source_hash, time_ms,
---  speedup_vs_eager, speedup_vs_compile, metrics, run_id, attempt_id}` → archive id. `problem_hash`, `gpu`, `source`
---  and `time_ms` are required; only verified kernels belong here.
---@param args table
---@return any
function db:archive_kernel(args) end

---`db:best_archived{problem_hash, gpu, dtype = "fp32"}` → the fastest archived kernel row
---  (`id, problem_hash, gpu, dtype, source, time_ms, ..., metrics, run_id, created`) or `nil`.
---  `gpu = nil` matches any GPU.
---@param args table
---@return any
function db:best_archived(args) end

---`db:merge(path)` → `{runs = n, rounds = n, attempts = n, reflexions = n, skills = n,
---  skill_outcomes = n, lessons = n, archive = n, llm_calls = n, llm_cache = n, measurements = n}` (rows added to this
---  database), or `nil, "EDB: ...", "EDB"` (no file at `path`, `path` is this database, a newer
---  schema). Copies in, in one transaction, every row of the database at `path` that this one lacks,
---  matched on keys that do not depend on the file: the `uid`; `(run, round)` for rounds; the name of
---  a skill; the key of an LLM reply; the kind and key of a measurement. `run_id`, `parent_id`, `attempt_id`, `source_attempt`,
---  `best_attempt` and the attempt ids in `rounds.parents` are rewritten to this database's ids. A row
---  already here keeps this database's version, except that a run (or round) that finished later in
---  `path` takes its `status`, `summary` and `finished`, a skill takes the fields of its latest
---  registration, and a measurement taken later in `path` replaces this one's. Merging the same file again adds nothing; merging a copy of this database (`VACUUM
---  INTO`) that went on adds only what it added. The file at `path` is migrated to this build's schema
---  first. Raises inside `db:transaction`. Used by `agents/sweep.lua` to join the databases of Slurm
---  tasks (`docs/sweeps.md`).
---@param path string
---@return any
function db:merge(path) end

---`db:cache_get(key)` → `response, request, created` or `nil`.
---@param key string
---@return any
function db:cache_get(key) end

---`db:cache_put(key, request, response)` → `true` (replaces an older entry).
---@param key string
---@param request any
---@param response any
---@return any
function db:cache_put(key, request, response) end

---`db:measurement_get(kind, key)` → `value` (the stored table, decoded), `created` or `nil`.
---@param kind any
---@param key string
---@return any
function db:measurement_get(kind, key) end

---`db:measurement_put(kind, key, value)` → `true`: `value` a table (stored as JSON); replaces the
---  row of that kind and key.
---@param kind any
---@param key string
---@param value any
---@return any
function db:measurement_put(kind, key, value) end

return mem
