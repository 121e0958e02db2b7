-- kagent.secrets: what may leave the runtime for an evaluator worker (an environment allow-list)
-- and the one redaction step for text that comes back. Candidate kernels are untrusted code: the
-- text of a worker's reply (errors, tracebacks, mismatch text) and of its stderr is redacted here
-- as it arrives (kagent/gpu/worker.lua), and so is every log line (kagent/log.lua), so no secret value
-- reaches a log, a trace, the database, a report or a prompt downstream.
--
-- The secrets: the values of the API-key variables the runtime knows (ANTHROPIC_API_KEY,
-- OPENAI_API_KEY, KAGENT_LLM_KEY, a name given to llm.configure{api_key_env}) and of every
-- variable of the environment (.env included, its values the environment overrode too) whose
-- name has a secret word. The allow-list and the secret words live in the evaluator's
-- kagent_eval/env_allow.txt, shared with the worker.
local native = require("kagent.native")

local M = {}

local KNOWN = { "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "KAGENT_LLM_KEY" }
local MIN_LENGTH = 8 -- shorter values are words, not keys: redacting them would garble text
local names = {}
for _, n in ipairs(KNOWN) do names[n] = true end
local policy, values

local function list_path()
  return require("kagent.search_path").eval_dir(require("kagent").root) .. "/kagent_eval/env_allow.txt"
end

-- {names = set, prefixes = array, words = set} from env_allow.txt (empty where it is missing)
local function load_policy()
  if policy then return policy end
  policy = { names = {}, prefixes = {}, words = {} }
  local f = io.open(list_path(), "r")
  if not f then return policy end
  for line in f:lines() do
    local kind, value = line:gsub("#.*", ""):match("^%s*(%S+)%s+(%S+)%s*$")
    if kind == "allow" and value:sub(-1) == "*" then
      policy.prefixes[#policy.prefixes + 1] = value:sub(1, -2)
    elseif kind == "allow" then
      policy.names[value] = true
    elseif kind == "secret" then
      policy.words[value] = true
    end
  end
  f:close()
  return policy
end

--- looks_secret(name) -> boolean: the name has a secret word (KEY, TOKEN, ...) between underscores.
function M.looks_secret(name)
  local words = load_policy().words
  for word in name:upper():gmatch("[^_]+") do
    if words[word] then return true end
  end
  return false
end

--- allowed(name) -> boolean: the variable may be passed to an evaluator worker.
function M.allowed(name)
  local p = load_policy()
  if M.looks_secret(name) then return false end
  if p.names[name] then return true end
  for _, prefix in ipairs(p.prefixes) do
    if name:sub(1, #prefix) == prefix then return true end
  end
  return false
end

--- worker_env(extra) -> {NAME = value}: the allowed part of the runtime's environment, with
--- `extra` (NAME = value or false) applied and filtered the same way.
function M.worker_env(extra)
  local env = {}
  for k, v in pairs(native.proc.environ()) do
    if M.allowed(k) then env[k] = v end
  end
  for k, v in pairs(extra or {}) do
    if v == false then env[k] = nil elseif M.allowed(k) then env[k] = tostring(v) end
  end
  return env
end

--- add_name(name): the value of this variable is a secret too (an llm api_key_env).
function M.add_name(name)
  if type(name) == "string" and not names[name] then
    names[name] = true
    values = nil
  end
end

-- {{name, value}} longest value first, so a secret containing another is replaced whole
local function secret_values()
  if values then return values end
  values = {}
  -- the .env values the environment overrode are keys on disk all the same (issue #53)
  for _, vars in ipairs({ native.proc.environ(), native.proc.env_file_overridden() }) do
    for k, v in pairs(vars) do
      if #v >= MIN_LENGTH and (names[k] or M.looks_secret(k)) then values[#values + 1] = { k, v } end
    end
  end
  table.sort(values, function(a, b) return #a[2] > #b[2] end)
  return values
end

local function replace_plain(text, find, with)
  local out, pos = {}, 1
  while true do
    local i, j = text:find(find, pos, true)
    if not i then break end
    out[#out + 1] = text:sub(pos, i - 1)
    out[#out + 1] = with
    pos = j + 1
  end
  out[#out + 1] = text:sub(pos)
  return table.concat(out)
end

--- redact(text) -> text with every secret value replaced by "[redacted NAME]". Non-strings are
--- returned as they are.
function M.redact(text)
  if type(text) ~= "string" or #text < MIN_LENGTH then return text end
  for _, s in ipairs(secret_values()) do
    if text:find(s[2], 1, true) then text = replace_plain(text, s[2], "[redacted " .. s[1] .. "]") end
  end
  return text
end

--- redact_tree(v) -> v with every string in it (keys too) redacted; tables are changed in place.
function M.redact_tree(v)
  if type(v) == "string" then return M.redact(v) end
  if type(v) ~= "table" then return v end
  local renamed = {}
  for k, x in pairs(v) do
    v[k] = M.redact_tree(x)
    if type(k) == "string" and M.redact(k) ~= k then renamed[k] = M.redact(k) end
  end
  for old, new in pairs(renamed) do
    v[new], v[old] = v[old], nil
  end
  return v
end

return M
