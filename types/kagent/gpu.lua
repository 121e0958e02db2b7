---@meta
-- Generated from docs/lua-api.md by scripts/gen_lua_types.lua: do not edit; run
-- `build/kagent-rt scripts/gen_lua_types.lua` after changing the docs.

---@class kagent.gpu
local gpu = {}

---`gpu.pool(opts)` → `pool`. Does not yield: workers start on first use. Options:
---  - `devices`: array of GPU indices (`{0, 1}`) or `"cpu"`. Default: every GPU that `nvidia-smi -L`
---    lists, else `"cpu"`.
---  - `python`: interpreter (default env `KAGENT_PYTHON`, else `python3`).
---  - `workers_per_gpu` (default 1; more than 1 breaks timing exclusivity, use for verify-only pools).
---  - `timeout`: wall-clock seconds the pool waits for a job's reply before it kills and respawns
---    the worker (default 900; the worker's own per-stage timeouts normally end a job first);
---    `start_timeout` (default 120) for a worker's ready line.
---  - `env`: extra environment for the workers (table as in `proc.spawn`).
---  - `log_dir`: if set, each worker appends its stderr (candidate prints, tracebacks) to
---    `<log_dir>/worker-<device>-<n>.log`.
---@param opts? table
---@return kagent.gpu.Pool
function gpu.pool(opts) end

---@class kagent.gpu.Pool
local pool = {}

---`pool:devices()` ⏸ → array of `{device = 0|"cpu", mode = "cuda"|"cpu", gpu_name, torch, triton}`
---  (starts the workers), or `nil, "EWORKER: ...", "EWORKER"` if none starts. A worker whose
---  evaluator version (its ready line's `version`) is not `kagent.version` is stopped and does not
---  count as started: the error names both versions, the folder that `kagent_eval` came from, the
---  python, and what to do (remove the other `kagent_eval` from that python, or `pip install` the
---  shipped one).
---@return any
function pool:devices() end

---`pool:verify(job)` ⏸, `pool:benchmark(job)` ⏸ (verify, then time), `pool:profile(job)` ⏸
---  (verify, then profile), `pool:evaluate(job)` ⏸ (verify → audit → benchmark → profile) → `result`.
---  A job always yields a result table (never `nil`): a worker that dies or does not answer within
---  `timeout` is killed and respawned and the result is `{ok = false, stage = "worker", error =
---  "EWORKER: ..."}`; a request the worker refuses (missing problem file, bad dtype) gives
---  `{ok = false, stage = "load", error = "EBADREQ: ..."}`. Every result also carries `device`
---  and `wall` (seconds in the pool). Misuse (no `problem`/`candidate`) raises. Jobs from many
---  tasks queue for a free worker.
---@param job table
---@return any
function pool:verify(job) end

---`pool:verify(job)` ⏸, `pool:benchmark(job)` ⏸ (verify, then time), `pool:profile(job)` ⏸
---  (verify, then profile), `pool:evaluate(job)` ⏸ (verify → audit → benchmark → profile) → `result`.
---  A job always yields a result table (never `nil`): a worker that dies or does not answer within
---  `timeout` is killed and respawned and the result is `{ok = false, stage = "worker", error =
---  "EWORKER: ..."}`; a request the worker refuses (missing problem file, bad dtype) gives
---  `{ok = false, stage = "load", error = "EBADREQ: ..."}`. Every result also carries `device`
---  and `wall` (seconds in the pool). Misuse (no `problem`/`candidate`) raises. Jobs from many
---  tasks queue for a free worker.
---@param job table
---@return any
function pool:benchmark(job) end

---`pool:verify(job)` ⏸, `pool:benchmark(job)` ⏸ (verify, then time), `pool:profile(job)` ⏸
---  (verify, then profile), `pool:evaluate(job)` ⏸ (verify → audit → benchmark → profile) → `result`.
---  A job always yields a result table (never `nil`): a worker that dies or does not answer within
---  `timeout` is killed and respawned and the result is `{ok = false, stage = "worker", error =
---  "EWORKER: ..."}`; a request the worker refuses (missing problem file, bad dtype) gives
---  `{ok = false, stage = "load", error = "EBADREQ: ..."}`. Every result also carries `device`
---  and `wall` (seconds in the pool). Misuse (no `problem`/`candidate`) raises. Jobs from many
---  tasks queue for a free worker.
---@param job table
---@return any
function pool:profile(job) end

---`pool:verify(job)` ⏸, `pool:benchmark(job)` ⏸ (verify, then time), `pool:profile(job)` ⏸
---  (verify, then profile), `pool:evaluate(job)` ⏸ (verify → audit → benchmark → profile) → `result`.
---  A job always yields a result table (never `nil`): a worker that dies or does not answer within
---  `timeout` is killed and respawned and the result is `{ok = false, stage = "worker", error =
---  "EWORKER: ..."}`; a request the worker refuses (missing problem file, bad dtype) gives
---  `{ok = false, stage = "load", error = "EBADREQ: ..."}`. Every result also carries `device`
---  and `wall` (seconds in the pool). Misuse (no `problem`/`candidate`) raises. Jobs from many
---  tasks queue for a free worker.
---@param job table
---@return any
function pool:evaluate(job) end

---`pool:peaks(device)` ⏸ → measured GPU peaks from the worker (`{ok, ...}`), used by the roofline.
---@param device? any
---@return any
function pool:peaks(device) end

---`pool:stats()` → `{jobs, failures, respawns, busy}`. `pool:close()` stops the workers.
---@return any
function pool:stats() end

---`pool:stats()` → `{jobs, failures, respawns, busy}`. `pool:close()` stops the workers.
---@return any
function pool:close() end

return gpu
