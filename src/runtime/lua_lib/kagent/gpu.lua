-- kagent.gpu: the evaluator pool. Workers are `python3 -m kagent_eval.worker` processes
-- (workers_per_gpu per GPU, or per CPU device) spoken to with JSON lines; each job's candidate
-- runs in a process the worker forks, and the verdict comes from the worker. A worker that dies
-- or stops answering is killed and respawned, and the job still gets a result (ok=false, error
-- "EWORKER: ...").
--
-- This file is the public module; the parts, one job each, are in kagent/gpu/:
--   devices.lua     the GPUs this process may use; workers per GPU for "auto"
--   pool.lua        the pool: starting its workers, which free worker takes a job
--   jobs.lua        the pool's verbs (verify, benchmark, ...) and their results
--   worker.lua      one worker process: start, request/reply, restart
--   worker_log.lua  a worker's stderr to its log, capped and redacted
--   lease.lua       a device's shared/exclusive lease among the workers that share it
local devices = require("kagent.gpu.devices")
local pool = require("kagent.gpu.pool")
local worker = require("kagent.gpu.worker")
local worker_log = require("kagent.gpu.worker_log")

local M = {}

--- pool(opts) -> pool. Workers start on first use (this call does not yield). See docs/lua-api.md.
M.pool = pool.new
--- gpus() ⏸ -> the GPUs this process may use, in the order of a pool's device numbers (0, 1, ...):
--- array of {index, uuid, name, mig, visible}. See docs/lua-api.md.
M.gpus = devices.gpus
--- auto_workers_per_gpu({cores, memory_bytes, gpus}) ⏸ -> {workers, cores, memory_bytes, gpus, rule}.
M.auto_workers_per_gpu = devices.auto_workers_per_gpu
M.AUTO_WORKERS = devices.AUTO_WORKERS
--- The caps on what a worker sends back: a line of its log, and one reply. See docs/lua-api.md.
M.MAX_LOG_LINE = worker_log.MAX_LOG_LINE
M.MAX_REPLY = worker.MAX_REPLY

return M
