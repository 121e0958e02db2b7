---@meta
-- Generated from docs/lua-api.md by scripts/gen_lua_types.lua: do not edit; run
-- `build/kagent-rt scripts/gen_lua_types.lua` after changing the docs.

---@class kagent.gpu
local gpu = {}

---`gpu.auto_workers_per_gpu({cores, memory_bytes, gpus})` ⏸ → `{workers, cores, memory_bytes,
---  gpus, rule}`: the automatic `workers_per_gpu` of a pool (its one definition).
---  `workers = max(1, min(floor(cores / gpus / 4), floor(memory GiB / gpus / 8), 4))`: a worker
---  keeps about one core busy compiling and a torch process and candidate in host memory, and more
---  than 4 add little, since every timed stage waits for the GPU's one lease. The constants are
---  `gpu.AUTO_WORKERS` (`{cores_per_worker = 4, memory_gib_per_worker = 8, max = 4}`). Fields not
---  given are read from this host: `cores` the CPUs this process may run on (`nproc`), `memory_bytes`
---  `MemTotal` of `/proc/meminfo` or a smaller cgroup v2 `memory.max`, `gpus` `#gpu.gpus()` (at
---  least 1). `rule` is the formula with those figures, e.g. `"min(16 cores per GPU / 4, 126 GiB per
---  GPU / 8, 4)"`. On a host of 16 cores and 128 GiB per H100 it gives 4.
---@type any
gpu.AUTO_WORKERS = nil

---`gpu.pool(opts)` → `pool`. Does not yield: workers start on first use. Options:
---  - `devices`: array of GPU numbers, positions in `gpu.gpus()` (`{0, 1}`: the first two GPUs this
---    process may use), or `"cpu"`. Default: every GPU of `gpu.gpus()`, else `"cpu"`. Each GPU
---    worker gets that GPU alone (`CUDA_VISIBLE_DEVICES` set to its `visible`), so a pool never
---    leaves the GPUs an inherited mask allows. A number past the list starts no worker.
---  - `python`: interpreter (default env `KAGENT_PYTHON`, else `python3`).
---  - `workers_per_gpu`: workers per device (per GPU, or for `"cpu"`), a number >= 1 or `"auto"`;
---    more than 1 shares the device's lease among them (above). Default: env
---    `KAGENT_WORKERS_PER_GPU` (a number or `auto`; anything else raises), else 1. On an H100, 4
---    workers per GPU evaluated 1.87x the candidates per minute of one on 20 µs matmul kernels and
---    1.11x on showcase #4, whose trials, timing and profile keep the GPU busy, while the pool took
---    twice as long to start (docs/results/2026-11-24-pipelined-pool.md); 1 stays the default,
---    and `"auto"` suits long searches of small kernels. `"auto"`
---    is resolved when the workers start: 1 in CPU mode, on GPUs `gpu.auto_workers_per_gpu({gpus =
---    #gpu.gpus()}).workers`. `pool:devices()` tells the number and how it was chosen.
---  - `timeout`: wall-clock seconds the pool waits for a job's reply before it kills and respawns
---    the worker (default 900; the worker's own per-stage timeouts normally end a job first);
---    `start_timeout` (default 120) for a worker's ready line.
---  - `env`: extra environment for the workers (table as in `proc.spawn`). A worker starts with a
---    cleared environment holding only the allow-listed part of the runtime's and of `env`
---    (`kagent.secrets.worker_env`): never an API key. Evaluator settings are `KAGENT_EVAL_*`
---    variables, e.g. `KAGENT_EVAL_MEMORY_MB` (each candidate's host memory limit, default half
---    the machine's; 0 none) and `KAGENT_EVAL_SANDBOX=auto|1|0` (auto and 1: the candidate sandbox, in
---    CPU and GPU mode; 0: off); `src/gpu/eval/README.md`.
---  - `log_dir`: if set, the pool appends each worker's stderr (candidate prints, tracebacks),
---    redacted, to `<log_dir>/worker-<device>-<n>.log`. Candidates are untrusted, so what they
---    print is bounded: the stream is taken at most 4 MiB at a time (the rest is counted as
---    dropped), a line longer than `kagent.gpu.MAX_LOG_LINE` (65536 bytes) is written as its head
---    and how many bytes were dropped, and reading it is linear in its length (50 MiB of 1 MiB
---    lines cost the event loop no pause a 20 ms timer notices: `tests/lua/gpu_output_flood_spec.lua`).
---  Every reply of a worker passes through `kagent.secrets.redact_tree` before the pool returns it.
---@param opts? table
---@return kagent.gpu.Pool
function gpu.pool(opts) end

---`gpu.pool(opts)` → `pool`. Does not yield: workers start on first use. Options:
---  - `devices`: array of GPU numbers, positions in `gpu.gpus()` (`{0, 1}`: the first two GPUs this
---    process may use), or `"cpu"`. Default: every GPU of `gpu.gpus()`, else `"cpu"`. Each GPU
---    worker gets that GPU alone (`CUDA_VISIBLE_DEVICES` set to its `visible`), so a pool never
---    leaves the GPUs an inherited mask allows. A number past the list starts no worker.
---  - `python`: interpreter (default env `KAGENT_PYTHON`, else `python3`).
---  - `workers_per_gpu`: workers per device (per GPU, or for `"cpu"`), a number >= 1 or `"auto"`;
---    more than 1 shares the device's lease among them (above). Default: env
---    `KAGENT_WORKERS_PER_GPU` (a number or `auto`; anything else raises), else 1. On an H100, 4
---    workers per GPU evaluated 1.87x the candidates per minute of one on 20 µs matmul kernels and
---    1.11x on showcase #4, whose trials, timing and profile keep the GPU busy, while the pool took
---    twice as long to start (docs/results/2026-11-24-pipelined-pool.md); 1 stays the default,
---    and `"auto"` suits long searches of small kernels. `"auto"`
---    is resolved when the workers start: 1 in CPU mode, on GPUs `gpu.auto_workers_per_gpu({gpus =
---    #gpu.gpus()}).workers`. `pool:devices()` tells the number and how it was chosen.
---  - `timeout`: wall-clock seconds the pool waits for a job's reply before it kills and respawns
---    the worker (default 900; the worker's own per-stage timeouts normally end a job first);
---    `start_timeout` (default 120) for a worker's ready line.
---  - `env`: extra environment for the workers (table as in `proc.spawn`). A worker starts with a
---    cleared environment holding only the allow-listed part of the runtime's and of `env`
---    (`kagent.secrets.worker_env`): never an API key. Evaluator settings are `KAGENT_EVAL_*`
---    variables, e.g. `KAGENT_EVAL_MEMORY_MB` (each candidate's host memory limit, default half
---    the machine's; 0 none) and `KAGENT_EVAL_SANDBOX=auto|1|0` (auto and 1: the candidate sandbox, in
---    CPU and GPU mode; 0: off); `src/gpu/eval/README.md`.
---  - `log_dir`: if set, the pool appends each worker's stderr (candidate prints, tracebacks),
---    redacted, to `<log_dir>/worker-<device>-<n>.log`. Candidates are untrusted, so what they
---    print is bounded: the stream is taken at most 4 MiB at a time (the rest is counted as
---    dropped), a line longer than `kagent.gpu.MAX_LOG_LINE` (65536 bytes) is written as its head
---    and how many bytes were dropped, and reading it is linear in its length (50 MiB of 1 MiB
---    lines cost the event loop no pause a 20 ms timer notices: `tests/lua/gpu_output_flood_spec.lua`).
---  Every reply of a worker passes through `kagent.secrets.redact_tree` before the pool returns it.
---@return any
function gpu.gpus() end

---`gpu.pool(opts)` → `pool`. Does not yield: workers start on first use. Options:
---  - `devices`: array of GPU numbers, positions in `gpu.gpus()` (`{0, 1}`: the first two GPUs this
---    process may use), or `"cpu"`. Default: every GPU of `gpu.gpus()`, else `"cpu"`. Each GPU
---    worker gets that GPU alone (`CUDA_VISIBLE_DEVICES` set to its `visible`), so a pool never
---    leaves the GPUs an inherited mask allows. A number past the list starts no worker.
---  - `python`: interpreter (default env `KAGENT_PYTHON`, else `python3`).
---  - `workers_per_gpu`: workers per device (per GPU, or for `"cpu"`), a number >= 1 or `"auto"`;
---    more than 1 shares the device's lease among them (above). Default: env
---    `KAGENT_WORKERS_PER_GPU` (a number or `auto`; anything else raises), else 1. On an H100, 4
---    workers per GPU evaluated 1.87x the candidates per minute of one on 20 µs matmul kernels and
---    1.11x on showcase #4, whose trials, timing and profile keep the GPU busy, while the pool took
---    twice as long to start (docs/results/2026-11-24-pipelined-pool.md); 1 stays the default,
---    and `"auto"` suits long searches of small kernels. `"auto"`
---    is resolved when the workers start: 1 in CPU mode, on GPUs `gpu.auto_workers_per_gpu({gpus =
---    #gpu.gpus()}).workers`. `pool:devices()` tells the number and how it was chosen.
---  - `timeout`: wall-clock seconds the pool waits for a job's reply before it kills and respawns
---    the worker (default 900; the worker's own per-stage timeouts normally end a job first);
---    `start_timeout` (default 120) for a worker's ready line.
---  - `env`: extra environment for the workers (table as in `proc.spawn`). A worker starts with a
---    cleared environment holding only the allow-listed part of the runtime's and of `env`
---    (`kagent.secrets.worker_env`): never an API key. Evaluator settings are `KAGENT_EVAL_*`
---    variables, e.g. `KAGENT_EVAL_MEMORY_MB` (each candidate's host memory limit, default half
---    the machine's; 0 none) and `KAGENT_EVAL_SANDBOX=auto|1|0` (auto and 1: the candidate sandbox, in
---    CPU and GPU mode; 0: off); `src/gpu/eval/README.md`.
---  - `log_dir`: if set, the pool appends each worker's stderr (candidate prints, tracebacks),
---    redacted, to `<log_dir>/worker-<device>-<n>.log`. Candidates are untrusted, so what they
---    print is bounded: the stream is taken at most 4 MiB at a time (the rest is counted as
---    dropped), a line longer than `kagent.gpu.MAX_LOG_LINE` (65536 bytes) is written as its head
---    and how many bytes were dropped, and reading it is linear in its length (50 MiB of 1 MiB
---    lines cost the event loop no pause a 20 ms timer notices: `tests/lua/gpu_output_flood_spec.lua`).
---  Every reply of a worker passes through `kagent.secrets.redact_tree` before the pool returns it.
---@param args table
---@return any
function gpu.auto_workers_per_gpu(args) end

---@class kagent.gpu.Pool
local pool = {}

---`gpu.pool(opts)` → `pool`. Does not yield: workers start on first use. Options:
---  - `devices`: array of GPU numbers, positions in `gpu.gpus()` (`{0, 1}`: the first two GPUs this
---    process may use), or `"cpu"`. Default: every GPU of `gpu.gpus()`, else `"cpu"`. Each GPU
---    worker gets that GPU alone (`CUDA_VISIBLE_DEVICES` set to its `visible`), so a pool never
---    leaves the GPUs an inherited mask allows. A number past the list starts no worker.
---  - `python`: interpreter (default env `KAGENT_PYTHON`, else `python3`).
---  - `workers_per_gpu`: workers per device (per GPU, or for `"cpu"`), a number >= 1 or `"auto"`;
---    more than 1 shares the device's lease among them (above). Default: env
---    `KAGENT_WORKERS_PER_GPU` (a number or `auto`; anything else raises), else 1. On an H100, 4
---    workers per GPU evaluated 1.87x the candidates per minute of one on 20 µs matmul kernels and
---    1.11x on showcase #4, whose trials, timing and profile keep the GPU busy, while the pool took
---    twice as long to start (docs/results/2026-11-24-pipelined-pool.md); 1 stays the default,
---    and `"auto"` suits long searches of small kernels. `"auto"`
---    is resolved when the workers start: 1 in CPU mode, on GPUs `gpu.auto_workers_per_gpu({gpus =
---    #gpu.gpus()}).workers`. `pool:devices()` tells the number and how it was chosen.
---  - `timeout`: wall-clock seconds the pool waits for a job's reply before it kills and respawns
---    the worker (default 900; the worker's own per-stage timeouts normally end a job first);
---    `start_timeout` (default 120) for a worker's ready line.
---  - `env`: extra environment for the workers (table as in `proc.spawn`). A worker starts with a
---    cleared environment holding only the allow-listed part of the runtime's and of `env`
---    (`kagent.secrets.worker_env`): never an API key. Evaluator settings are `KAGENT_EVAL_*`
---    variables, e.g. `KAGENT_EVAL_MEMORY_MB` (each candidate's host memory limit, default half
---    the machine's; 0 none) and `KAGENT_EVAL_SANDBOX=auto|1|0` (auto and 1: the candidate sandbox, in
---    CPU and GPU mode; 0: off); `src/gpu/eval/README.md`.
---  - `log_dir`: if set, the pool appends each worker's stderr (candidate prints, tracebacks),
---    redacted, to `<log_dir>/worker-<device>-<n>.log`. Candidates are untrusted, so what they
---    print is bounded: the stream is taken at most 4 MiB at a time (the rest is counted as
---    dropped), a line longer than `kagent.gpu.MAX_LOG_LINE` (65536 bytes) is written as its head
---    and how many bytes were dropped, and reading it is linear in its length (50 MiB of 1 MiB
---    lines cost the event loop no pause a 20 ms timer notices: `tests/lua/gpu_output_flood_spec.lua`).
---  Every reply of a worker passes through `kagent.secrets.redact_tree` before the pool returns it.
---@return any
function pool:devices() end

---`pool:verify(job)` ⏸, `pool:benchmark(job)` ⏸ (verify, then time), `pool:profile(job)` ⏸
---  (verify, then profile), `pool:evaluate(job)` ⏸ (verify → audit → benchmark → profile) → `result`.
---  A job always yields a result table (never `nil`): a worker that dies or does not answer within
---  `timeout` is killed and respawned and the result is `{ok = false, stage = "worker", error =
---  "EWORKER: ..."}`; a request the worker refuses (missing problem file, bad dtype) gives
---  `{ok = false, stage = "request", error = "EBADREQ: ..."}`, and a worker that fails on a job
---  without dying `{ok = false, stage = "worker", error = "EWORKER: ..."}`. Every result also
---  carries `device` (the pool device that ran it: its number, which `job.device` takes, or `"cpu"`), `gpu` (the
---  GPU that measured it, `{index, uuid, name, mig, visible}` as in `gpu.gpus()`; nil in CPU mode)
---  `wall` (seconds in the pool), `lease_wait_s` (seconds the job waited for its device's lease
---  exclusive, before its timed or profiled phases) and `lease_shared_wait_s` (seconds it waited for
---  the lease shared, before its untimed GPU work, while another job timed); both 0 where the device
---  has one worker. Where it has several, `lease_holds` lists when the job held the lease: `{mode =
---  "shared"|"exclusive", at, s}` in order (`at` on the clock of `stage_at` and `kagent.time.now()`,
---  `s` seconds held); a Triton compile inside a shared hold gives it up meanwhile (stage
---  `compile_host`), and a candidate that ran out of GPU memory beside the other workers' processes
---@param job table
---@return any
function pool:verify(job) end

---`pool:verify(job)` ⏸, `pool:benchmark(job)` ⏸ (verify, then time), `pool:profile(job)` ⏸
---  (verify, then profile), `pool:evaluate(job)` ⏸ (verify → audit → benchmark → profile) → `result`.
---  A job always yields a result table (never `nil`): a worker that dies or does not answer within
---  `timeout` is killed and respawned and the result is `{ok = false, stage = "worker", error =
---  "EWORKER: ..."}`; a request the worker refuses (missing problem file, bad dtype) gives
---  `{ok = false, stage = "request", error = "EBADREQ: ..."}`, and a worker that fails on a job
---  without dying `{ok = false, stage = "worker", error = "EWORKER: ..."}`. Every result also
---  carries `device` (the pool device that ran it: its number, which `job.device` takes, or `"cpu"`), `gpu` (the
---  GPU that measured it, `{index, uuid, name, mig, visible}` as in `gpu.gpus()`; nil in CPU mode)
---  `wall` (seconds in the pool), `lease_wait_s` (seconds the job waited for its device's lease
---  exclusive, before its timed or profiled phases) and `lease_shared_wait_s` (seconds it waited for
---  the lease shared, before its untimed GPU work, while another job timed); both 0 where the device
---  has one worker. Where it has several, `lease_holds` lists when the job held the lease: `{mode =
---  "shared"|"exclusive", at, s}` in order (`at` on the clock of `stage_at` and `kagent.time.now()`,
---  `s` seconds held); a Triton compile inside a shared hold gives it up meanwhile (stage
---  `compile_host`), and a candidate that ran out of GPU memory beside the other workers' processes
---@param job table
---@return any
function pool:benchmark(job) end

---`pool:verify(job)` ⏸, `pool:benchmark(job)` ⏸ (verify, then time), `pool:profile(job)` ⏸
---  (verify, then profile), `pool:evaluate(job)` ⏸ (verify → audit → benchmark → profile) → `result`.
---  A job always yields a result table (never `nil`): a worker that dies or does not answer within
---  `timeout` is killed and respawned and the result is `{ok = false, stage = "worker", error =
---  "EWORKER: ..."}`; a request the worker refuses (missing problem file, bad dtype) gives
---  `{ok = false, stage = "request", error = "EBADREQ: ..."}`, and a worker that fails on a job
---  without dying `{ok = false, stage = "worker", error = "EWORKER: ..."}`. Every result also
---  carries `device` (the pool device that ran it: its number, which `job.device` takes, or `"cpu"`), `gpu` (the
---  GPU that measured it, `{index, uuid, name, mig, visible}` as in `gpu.gpus()`; nil in CPU mode)
---  `wall` (seconds in the pool), `lease_wait_s` (seconds the job waited for its device's lease
---  exclusive, before its timed or profiled phases) and `lease_shared_wait_s` (seconds it waited for
---  the lease shared, before its untimed GPU work, while another job timed); both 0 where the device
---  has one worker. Where it has several, `lease_holds` lists when the job held the lease: `{mode =
---  "shared"|"exclusive", at, s}` in order (`at` on the clock of `stage_at` and `kagent.time.now()`,
---  `s` seconds held); a Triton compile inside a shared hold gives it up meanwhile (stage
---  `compile_host`), and a candidate that ran out of GPU memory beside the other workers' processes
---@param job table
---@return any
function pool:profile(job) end

---`pool:verify(job)` ⏸, `pool:benchmark(job)` ⏸ (verify, then time), `pool:profile(job)` ⏸
---  (verify, then profile), `pool:evaluate(job)` ⏸ (verify → audit → benchmark → profile) → `result`.
---  A job always yields a result table (never `nil`): a worker that dies or does not answer within
---  `timeout` is killed and respawned and the result is `{ok = false, stage = "worker", error =
---  "EWORKER: ..."}`; a request the worker refuses (missing problem file, bad dtype) gives
---  `{ok = false, stage = "request", error = "EBADREQ: ..."}`, and a worker that fails on a job
---  without dying `{ok = false, stage = "worker", error = "EWORKER: ..."}`. Every result also
---  carries `device` (the pool device that ran it: its number, which `job.device` takes, or `"cpu"`), `gpu` (the
---  GPU that measured it, `{index, uuid, name, mig, visible}` as in `gpu.gpus()`; nil in CPU mode)
---  `wall` (seconds in the pool), `lease_wait_s` (seconds the job waited for its device's lease
---  exclusive, before its timed or profiled phases) and `lease_shared_wait_s` (seconds it waited for
---  the lease shared, before its untimed GPU work, while another job timed); both 0 where the device
---  has one worker. Where it has several, `lease_holds` lists when the job held the lease: `{mode =
---  "shared"|"exclusive", at, s}` in order (`at` on the clock of `stage_at` and `kagent.time.now()`,
---  `s` seconds held); a Triton compile inside a shared hold gives it up meanwhile (stage
---  `compile_host`), and a candidate that ran out of GPU memory beside the other workers' processes
---@param job table
---@return any
function pool:evaluate(job) end

---`pool:compare(job)` ⏸ → interleaved timing of `job.candidates` (2 to 8 paths or sources,
---  each already verified) in one process: the same inputs, timer and launch pad, in `rounds`
---  blocks (default 8) of `calls_per_block` calls (default 5) ordered A B … then … B A, under the
---  all-stream check. Result `{ok, stage, candidates = {{time_ms, blocks, roofline, speedup =
---  {median, min, p10, p90, cv, pairs}}, ...}, rounds, calls_per_block}`; `speedup` summarises, over
---  the A B | B A pairs of blocks (`rounds` must be even), the first candidate's time over this
---  one's (the first's is 1): the order within a block cancels in a pair; `min` is the smallest
---  per-pair ratio and `cv` their coefficient of variation. The last output of each is checked
---  against the reference (`EMISMATCH` names the candidate). A candidate whose timing raises a
---  trust flag other than `spread` fails the comparison with `stage = "timing"`, `EUNTRUSTED`
---  (the spread is reported for the caller's gate: `time_ms.cv`, `speedup.p10..p90`). Takes the
---  job fields `problem`, `dtype`, `seed`, `bench`, `timeout(s)`.
---@param job table
---@return any
function pool:compare(job) end

---`pool:sanitize(job)` ⏸ → compute-sanitizer on one forward of `job.candidate`:
---  `{ok = true|false|nil, tools = {memcheck = {ok, errors, seconds, report}, racecheck = ...},
---  error}`. `ok = nil` means the tools could not judge (CPU mode, no `compute-sanitizer`: set
---  `KAGENT_COMPUTE_SANITIZER` or put the CUDA toolkit's `bin` on `PATH`; the forward failed under
---  them). `job.tools` picks tools (default `{"memcheck", "racecheck"}`), `job.tool_timeout`
---  seconds per tool (default 600). PyTorch's caching allocator is off in the checked process and
---  PyTorch's own kernels are left out of the check.
---@param job table
---@return any
function pool:sanitize(job) end

---`pool:analyze(job)` ⏸ → static analysis in a sandboxed child (what `agents/fuse.lua` routes,
---  splits and composes with); `job.kind` picks it, `job.dtype`, `job.seed`, `job.timeout` as for
---  other jobs. Every result has `ok`, `kind`, `elapsed`, and on failure `stage` and `error`
---  (`ERUN: ...` for an exception in the problem or candidate, or the sandbox's `ECRASH`,
---  `ETIMEDOUT`); a refused request is `{ok = false, stage = "request", error = "EBADREQ: ..."}`.
---  - `kind = "problem"` (default; `job.problem`): the `Model` traced with `torch.fx`
---    (`symbolic_trace`, ops nothing reads removed) and run once on the worker's device on the
---    problem's inputs. `{traced, trace_error, control_flow, decomposable, unsupported = {{node,
---    reason}}, inputs = {{name, shape, dtype, mean, std}}, placeholders = {{name, tensor}}, ops,
---    outputs (value names), output_expr, params = {qualname = {shape, dtype, mean, std | min,
---    max, kind = "parameter"|"buffer"}}, used_params, folded, module_types, param_bytes,
---    param_count, functional_check}`. Each op: `{name, op (label: layer class, function or
---    method name), kind (call_module|call_function|call_method), category (gemm, conv,
---    conv_transpose, attention, norm, softmax, pool, reduction, activation, elementwise, view,
---    other), expr, params (qualnames it reads), inputs (value names it reads), shape, dtype,
---    tensor (false for a tuple of tensors: then items = {{shape, dtype}}), mean, std,
---    module_ctor?}`. `expr` is the op's functional form, a Python expression in which
---    `${v:name}` is a value (a graph input or another op's result), `${p:qualname}` a parameter
---    or buffer of the model and `${m}` the op's parameter-free layer built by `module_ctor`:
---    layers with parameters become `torch.nn.functional` calls (Linear, Conv/ConvTranspose 1-3d,
---    BatchNorm, InstanceNorm, LayerNorm, GroupNorm, RMSNorm, PReLU, Embedding; batch and instance
---    norm in training mode on batch statistics), in-place ops are written out of place, and
---    Python values computed from shapes are folded into constants (`folded`). The program
---    assembled from the forms must reproduce the model's outputs on the same inputs
---    (`functional_check = true`, dtype tolerances), and the traced graph the model's.
---    `decomposable` is true only when both hold and `unsupported` is empty; it lists what has no
---    faithful form (a layer with parameters and no form here or called with more than its input,
---    an in-place op on a value others read, a tensor that is not a parameter or buffer, a Python
---    value read from tensor data, random ops). An untraceable model gives `traced = false` and
---    `trace_error` (`control_flow` when that is the cause), with `params` and `module_types`
---    still filled. A tensor constant the trace made (`torch.tensor(0.5)` in a forward) of at most
---    16 elements is written out as a literal where it is used. `job.shrink = true` lowers the
---    problem's size constants first (its batch to 2, other extents to 16, else 32, else only the
---    batch: the first setting at which the model runs) and says `shrunk = {name = {from, to}}`;
---    the shapes are then those of the smaller problem.
---  - `kind = "inductor"` (`job.problem`: a subgraph problem, a `Model` without parameters;
---    `job.library = "allow"|"deny"`): the problem compiled by TorchInductor on the worker's GPU and
---    the module it emitted made a standalone kernel file: `{source, extern_calls, triton_kernels}`;
---    `deny` uses max-autotune with Triton templates only. `ENOTSUP` in CPU mode or without
---    Inductor. The source is a candidate like any other: verify it.
---  - `kind = "forward"` (`job.problem`, `job.candidate`): the candidate's `ModelNew.forward`
---    traced with the classes and functions the candidate defines as leaves: `{traced, calls =
---    {{node, op, target, own}}, foreign (the calls that are not the candidate's own; unpacking an
---    own call's tuple is own), kernel_calls}`. A `kernel_function` candidate gives `traced = false`.
---  - `kind = "merge"` (`job.parts = {{prefix, source, label}}`): kernel sources joined into one
---    module, parse only. Each part's module-level names (functions, classes, constants) and the
---    references that resolve to them get its prefix, following Python's scopes (a parameter or
---    local of the same name is left alone); comments and layout are kept; plain top-level imports
---    are written once at the top. `{source, entries = {{kind = "ModelNew"|"kernel_function",
---    name}} (one per part, renamed), imports = {name = module}}`, or `ok = false` with
---    `error = "EMERGE: ..."` when a part does not parse, defines no entry point, or two parts
---    import different modules under one name.
---@param job table
---@return any
function pool:analyze(job) end

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
