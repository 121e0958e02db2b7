---@meta
-- Generated from docs/lua-api.md by scripts/gen_lua_types.lua: do not edit; run
-- `build/kagent-rt scripts/gen_lua_types.lua` after changing the docs.

---@class kagent.prompt
local prompt = {}

---`prompt.render(name_or_path, vars)` → string, or `nil, "ENOTFOUND: prompt template <path>",
---  "ENOTFOUND"` when the file does not exist. A bare name (`"diagnose"`) is looked up in the folders
---  of `prompt.dirs` (array, searched first, default empty) and then as `prompts/<name>.md` on
---  `kagent.path` (the user's folder, then `kagent.root`); a string containing `/` or ending in
---  `.md`/`.txt` is a path.
---  - `{{name}}` must be present in `vars`: a missing one **raises**
---    `"prompt.render: missing variable 'name' in <path>"` (a prompt missing its metrics or code is a bug).
---  - `{{name?}}` is optional: absent renders as the empty string.
---  - `{{a.b}}` reaches into nested tables.
---  - Strings are inserted as is; integers without a fraction; other numbers with `%.6g`; booleans as
---    `true`/`false`; tables as pretty JSON (`kagent.json.encode`). Functions/userdata raise.
---@type string[]
prompt.dirs = nil

---`prompt.render(name_or_path, vars)` → string, or `nil, "ENOTFOUND: prompt template <path>",
---  "ENOTFOUND"` when the file does not exist. A bare name (`"diagnose"`) is looked up in the folders
---  of `prompt.dirs` (array, searched first, default empty) and then as `prompts/<name>.md` on
---  `kagent.path` (the user's folder, then `kagent.root`); a string containing `/` or ending in
---  `.md`/`.txt` is a path.
---  - `{{name}}` must be present in `vars`: a missing one **raises**
---    `"prompt.render: missing variable 'name' in <path>"` (a prompt missing its metrics or code is a bug).
---  - `{{name?}}` is optional: absent renders as the empty string.
---  - `{{a.b}}` reaches into nested tables.
---  - Strings are inserted as is; integers without a fraction; other numbers with `%.6g`; booleans as
---    `true`/`false`; tables as pretty JSON (`kagent.json.encode`). Functions/userdata raise.
---@param name_or_path string
---@param vars? table
---@return string?, string?
function prompt.render(name_or_path, vars) end

---`prompt.render_string(template, vars, label)` → string: the same rules on a template string
---  (`label` names it in errors).
---@param template string
---@param vars? table
---@param label? string
---@return any
function prompt.render_string(template, vars, label) end

---`prompt.variables(name_or_path)` → sorted array of the required variable names, or `nil, err`.
---@param name_or_path string
---@return any
function prompt.variables(name_or_path) end

---`prompt.resolve(name_or_path)` → the path `render` reads (a bare name resolved as above; the
---  path under `kagent.root` when no folder has it).
---@param name_or_path string
---@return any
function prompt.resolve(name_or_path) end

return prompt
