---@meta
-- Generated from docs/lua-api.md by scripts/gen_lua_types.lua: do not edit; run
-- `build/kagent-rt scripts/gen_lua_types.lua` after changing the docs.

---The kagent-rt scripting API (docs/lua-api.md): a preloaded global.
---@class kagent
---@field task kagent.task
---@field time kagent.time
---@field proc kagent.proc
---@field json kagent.json
---@field yaml kagent.yaml
---@field log kagent.log
---@field fs kagent.fs
---@field prompt kagent.prompt
---@field gpu kagent.gpu
---@field http kagent.http
---@field llm kagent.llm
---@field mem kagent.mem
---@field secrets kagent.secrets
kagent = {}

---| `kagent.version` | version string, e.g. `"0.1.0"` |
---@type string
kagent.version = nil

---| `kagent.args` | array of the script's arguments (strings) |
---@type string[]
kagent.args = nil

---| `kagent.script` | path of the script being run |
---@type string
kagent.script = nil

---| `kagent.exe` | path of the running `kagent-rt` binary (to start another one; children cannot read it from `/proc`, as `kagent-rt` is not dumpable) |
---@type string?
kagent.exe = nil

---| `kagent.root` | the folder holding the shipped `agents/`, `skills/`, `prompts/`: the checkout, or `<prefix>/share/kagent-rt` for an installed binary (found from the executable's location; `KAGENT_ROOT` overrides) |
---@type string
kagent.root = nil

---| `kagent.path` | array of folders searched for agents, roles, policies, skills and prompts: the user's folder (`KAGENT_HOME`, else `${XDG_DATA_HOME:-~/.local/share}/kagent-rt`), then `kagent.root` |
---@type string[]
kagent.path = nil

---`kagent.resolve(rel)` → the first `<dir>/<rel>` on `kagent.path` that exists, or `nil`.
---@param rel string
---@return string?
function kagent.resolve(rel) end

---`kagent.sha256(s)` → the lower-case hex SHA-256 digest of the string `s`. It is the one hash of
---  the agents' fingerprints: `problem_hash` in memory is `kagent.sha256(problem code)`, and a
---  kernel's `source_hash` is `"src:" .. kagent.sha256(its code without comments and blank
---  lines)` (`agents/lib/fingerprint.lua`); its `fingerprint` is only ever the evaluator's (16 hex
---  digits of the AST hash), absent when the evaluator gave none (`agents/search/attempt.lua`). Rows that an older kagent-rt wrote with its earlier
---  16-digit hash take the new one when a run of their problem next opens the database.
---@param s any
---@return any
function kagent.sha256(s) end

---`kagent.files(subdir, suffix)` → sorted array of the paths of `<dir>/<subdir>/*<suffix>` over
---  `kagent.path`, one per file name (the first folder that has a name wins); `suffix` is optional.
---@param subdir string
---@param suffix? string
---@return string[]
function kagent.files(subdir, suffix) end

return kagent
