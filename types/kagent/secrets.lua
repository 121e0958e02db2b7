---@meta
-- Generated from docs/lua-api.md by scripts/gen_lua_types.lua: do not edit; run
-- `build/kagent-rt scripts/gen_lua_types.lua` after changing the docs.

---@class kagent.secrets
local secrets = {}

---`secrets.redact(text)` → text with the value of every secret replaced by `[redacted NAME]`.
---  The secrets: the values (8 characters or more) of `ANTHROPIC_API_KEY`, `OPENAI_API_KEY`,
---  `KAGENT_LLM_KEY`, of the variable `llm.configure`'s `api_key_env` names or `secrets.add_name` adds, and
---  of every variable of the environment (`.env` included, its values the environment overrode
---  too) whose name has a secret word between
---  underscores (KEY, TOKEN, SECRET, PASSWORD, AUTH, ...). Non-strings are returned as they are.
---@param text string
---@return string
function secrets.redact(text) end

---`secrets.redact_tree(v)` → `v` with every string in it (keys too) redacted, in place.
---@param v any
---@return any
function secrets.redact_tree(v) end

---`secrets.add_name(name)` — the value of this variable is a secret too.
---@param name string
---@return any
function secrets.add_name(name) end

---`secrets.looks_secret(name)`, `secrets.allowed(name)` → boolean.
---@param name string
---@return any
function secrets.looks_secret(name) end

---`secrets.looks_secret(name)`, `secrets.allowed(name)` → boolean.
---@param name string
---@return any
function secrets.allowed(name) end

---`secrets.worker_env(extra)` → the allowed part of the runtime's environment with `extra`
---  (`NAME = value`, or `false` to remove) applied and filtered the same way.
---@param extra any
---@return any
function secrets.worker_env(extra) end

return secrets
