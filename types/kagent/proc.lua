---@meta
-- Generated from docs/lua-api.md by scripts/gen_lua_types.lua: do not edit; run
-- `build/kagent-rt scripts/gen_lua_types.lua` after changing the docs.

---@class kagent.proc
local proc = {}

---`proc.spawn(argv, opts)` → `p` or `nil, "ESPAWN: ...", "ESPAWN"`. `argv` is an array of strings;
---  `argv[1]` is looked up in `PATH`. Options:
---  - `cwd` (string), `env` (table of `NAME=value` pairs added to, or with value `false` removed
---    from, the current environment), `clear_env` (boolean: start from an empty environment),
---  - `stdin` (string written to the child and then closed; or `true` to keep stdin open for
---    `p:write`),
---  - `timeout` (seconds; the process group is killed when it passes),
---  - `kill_grace` (seconds between TERM and KILL, default 2),
---  - `max_output` (bytes kept per stream, default 16 MiB: what `wait` returns, and what is buffered
---    and not yet read; the rest is dropped and counted),
---  - `max_line` (bytes per stdout line once stdout is read with `read_line`, default 1 MiB, at most
---    `max_output`).
---  The child runs in its own process group. When `kagent-rt` stops, the group of every child still
---  running gets TERM, and KILL after at most 1 s.
---@param argv string[]
---@param opts? table
---@return kagent.proc.Process?
function proc.spawn(argv, opts) end

---`proc.environ()` → `{NAME = value}`: the runtime's environment, `.env` values included.
---@return any
function proc.environ() end

---`proc.run(argv, opts)` ⏸ — `spawn` + `wait(opts.timeout)`; returns the wait table or
---  `nil, err, code`.
---@param argv string[]
---@param opts? table
---@return kagent.proc.Result?, string?, string?
function proc.run(argv, opts) end

---@class kagent.proc.Process
---@field pid integer `p.pid` — process id.
---@field argv any `p.argv` — the command it was started with (the `argv` given to `spawn`).
local p = {}

---`p:write(s)` ⏸ → `true` or `nil, err`. `p:close_stdin()`.
---@param s any
---@return any
function p:write(s) end

---`p:write(s)` ⏸ → `true` or `nil, err`. `p:close_stdin()`.
---@return any
function p:close_stdin() end

---`p:read_line(timeout)` ⏸ → `line, cut`: a line of stdout without its newline, and `cut` (true
---  when the line was longer than `max_line`: `line` is its first `max_line` bytes, handed over as
---  soon as they arrived, and the rest of the line up to its newline is dropped and counted in
---  `stdout_dropped`); or `nil, "ETIMEDOUT: ..."`, or `nil, "EOF: ..."` at end of output. Lines are
---  split in one pass over the output, so neither the time nor the memory a line costs grows with
---  what a child writes without a newline (`tests/lua/proc_flood_spec.lua`: `cat /dev/zero` read by
---  lines gives 1 MiB heads without a pause of the event loop, and `kagent-rt` stops at once on
---  SIGTERM during such a flood). Lines read this way are not returned again by `wait`.
---@param timeout? number
---@return string?, boolean|string?
function p:read_line(timeout) end

---`p:wait(timeout)` ⏸ → `{code, signal, stdout, stderr, timed_out, elapsed, stdout_dropped,
---  stderr_dropped}`. If `timeout` (or the spawn `timeout`) passes first, the process group gets TERM,
---  then KILL after `kill_grace`; `timed_out=true` and `code=124`. `signal` is the signal number that
---  ended the process, or `nil`.
---@param timeout? number
---@return kagent.proc.Result
function p:wait(timeout) end

---`p:kill(sig)` — signal the whole process group (default TERM, then KILL after `kill_grace`).
---@param sig? any
---@return any
function p:kill(sig) end

---`p:take_stderr()` → `text, dropped`: the stderr received since the last call (for a long-lived
---  child whose stderr is consumed as it comes: what was taken before the child exited is not in
---  `wait`'s `stderr`) and the bytes dropped over `max_output` since then.
---@return any
function p:take_stderr() end

---`p:running()` → boolean.
---@return boolean
function p:running() end

return proc
