---@meta
-- Generated from docs/lua-api.md by scripts/gen_lua_types.lua: do not edit; run
-- `build/kagent-rt scripts/gen_lua_types.lua` after changing the docs.

---@class kagent.fs
local fs = {}

---`fs.read(path)` → string or `nil, "EIO: ...", "EIO"`. A named pipe or socket is refused
---  (`EIO: cannot read P: a named pipe or socket, not a file`) rather than waited on.
---@param path string
---@return string?, string?, string?
function fs.read(path) end

---`fs.write(path, data)` → `true` or `nil, err`: written to a temporary file in the same folder,
---  flushed, and renamed over `path` (readers see the old or the new file, never half).
---@param path string
---@param data string
---@return boolean?, string?
function fs.write(path, data) end

---`fs.append(path, data)` → `true` or `nil, err`.
---@param path string
---@param data string
---@return any
function fs.append(path, data) end

---`fs.mkdir_p(path)` → `true` or `nil, err`.
---@param path string
---@return any
function fs.mkdir_p(path) end

---`fs.list(path)` → sorted array of names (no `.`/`..`) or `nil, err`.
---@param path string
---@return string[]?, string?
function fs.list(path) end

---`fs.exists(path)` → boolean. `fs.is_dir(path)` → boolean.
---@param path string
---@return boolean
function fs.exists(path) end

---`fs.exists(path)` → boolean. `fs.is_dir(path)` → boolean.
---@param path string
---@return boolean
function fs.is_dir(path) end

---`fs.join(a, b, ...)` → path. `fs.dirname(p)`, `fs.basename(p)`, `fs.abspath(p)`.
---@param a any
---@param b any
---@param ... any
---@return string
function fs.join(a, b, ...) end

---`fs.join(a, b, ...)` → path. `fs.dirname(p)`, `fs.basename(p)`, `fs.abspath(p)`.
---@param p any
---@return any
function fs.dirname(p) end

---`fs.join(a, b, ...)` → path. `fs.dirname(p)`, `fs.basename(p)`, `fs.abspath(p)`.
---@param p any
---@return any
function fs.basename(p) end

---`fs.join(a, b, ...)` → path. `fs.dirname(p)`, `fs.basename(p)`, `fs.abspath(p)`.
---@param p any
---@return any
function fs.abspath(p) end

---`fs.remove(path)` → `true` or `nil, err` (files and empty folders).
---@param path string
---@return any
function fs.remove(path) end

---`fs.isatty(fd)` → boolean: whether file descriptor `fd` (0, 1, 2) is a terminal.
---@param fd integer
---@return boolean
function fs.isatty(fd) end

---`fs.term_columns(fd)` → integer or `nil`: the width in columns of the terminal on `fd`
---  (`TIOCGWINSZ`); `nil` when `fd` is no terminal or the terminal reports no size. Read afresh at
---  each call, so a caller that asks at each redraw follows a resize (`SIGWINCH`).
---@param fd integer
---@return integer?
function fs.term_columns(fd) end

---`fs.resizes()` → integer: how many times the terminal was resized so far (the `SIGWINCH`s the
---  runtime has read on its loop).
---@return integer
function fs.resizes() end

---`fs.wait_resize([seen])` → integer, the new `fs.resizes()`: returns at once when more than
---  `seen` resizes came, else parks the running task until the next `SIGWINCH`; every waiting task
---  wakes, and killing one takes its wait back. A loop passes the count it last saw, so a resize
---  between two waits is not missed (`agents/run/progress.lua` redraws its status line this way).
---  Only inside a task.
---@param args table
---@return integer
function fs.wait_resize(args) end

---`fs.lock(path)` → `handle` or `nil, "EBUSY: <path> is locked by process N", "EBUSY", N` (N `nil`
---  when the file names no pid) or `nil, "EIO: ...", "EIO"`: an exclusive advisory lock (`flock`) on
---  the file at `path`, made if missing and never truncated until the lock is held; it then holds
---  this process's pid and a newline. Held until `handle:unlock()` (→ `true`), until the handle is
---  collected, or until the process ends in any way (`kill -9` included: the kernel drops it); not
---  inherited by children. A second `fs.lock` of the same file is `EBUSY` in this process too.
---  `handle:locked()` → boolean. The agents lock a run folder with it (`docs/agents.md`).
---@param path string
---@return any
function fs.lock(path) end

return fs
