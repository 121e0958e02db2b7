-- --config FILE: options from a file. Keys are the long option names (`rounds`, `max-cv` or
-- `max_cv`); KernelAgent's keys are accepted where they mean the same (KA below); options given
-- on the command line win. The file is JSON (it starts with "{") or this subset of YAML:
--   key: value            a string, number, true/false, or null (nothing set); "..." or '...'
--   # comment             whole lines, or after a value following a space
--   section:              KernelAgent's strategy_config: its indented `key: value` lines
--     key: value
-- No lists, anchors, multi-line strings or flow mappings: such a line is an error naming it.
-- The merged options are the run's (state.json's `opts`), which --resume uses without the file.
local fs = require("kagent.fs")
local keys_lib = require("agents.lib.keys")
local json = require("kagent.json")

local M = {}

-- KernelAgent's configuration keys -> ours, with its values translated where they differ.
M.KA = {
  strategy = { "policy", { beam_search = "beam", greedy = "greedy" } },
  ["strategy_config.num_top_kernels"] = { "beam" },
  ["strategy_config.num_bottlenecks"] = { "directions" },
  ["strategy_config.max_no_improvement"] = { "plateau" },
  openai_model = { "model" },
}
-- KernelAgent's keys with no counterpart here: named in a note, not an error.
M.KA_IGNORED = { num_workers = "workers follow --beam x --directions",
  high_reasoning_effort = "no setting here", benchmark_warmup = "timing is adaptive",
  benchmark_repeat = "timing is adaptive", divergence_threshold = "no setting here",
  target_platform = "the device is found", gpu_name = "the device is found" }

local function scalar(raw, where)
  local v = raw:match("^%s*(.-)%s*$")
  local q = v:sub(1, 1)
  if q == '"' or q == "'" then
    local body, rest = v:match("^" .. q .. "(.-)" .. q .. "(.*)$")
    if not body or not (rest:match("^%s*$") or rest:match("^%s+#")) then
      return nil, where .. ": unterminated quoted string"
    end
    if q == '"' then body = body:gsub('\\"', '"') end
    return body
  end
  v = v:gsub("%s+#.*$", "")
  if v == "" or v == "~" or v == "null" then return json.null end
  if v == "true" then return true end
  if v == "false" then return false end
  if v:match("^[%[{|>&*!]") then return nil, where .. ": only plain values are read here (no lists, mappings or blocks)" end
  return tonumber(v) or v
end

-- parse_yaml(text, name) -> flat table {key or "section.key" = value}, or nil, why
function M.parse_yaml(text, name)
  local out, section = {}, nil
  local n = 0
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    line = line:gsub("\r$", "")
    local where = string.format("%s:%d", name, n)
    if not (line:match("^%s*$") or line:match("^%s*#") or line == "---") then
      local indent, key, rest = line:match("^(%s*)([%w_%-]+):(.*)$")
      if not key then return nil, where .. ": expected 'key: value'" end
      if rest:match("^%s*$") or rest:match("^%s+#") then
        if #indent > 0 then return nil, where .. ": only one level of sections is read" end
        section = key
      elseif #indent > 0 then
        if not section then return nil, where .. ": indented, but under no section" end
        local v, why = scalar(rest, where)
        if v == nil then return nil, why end
        out[section .. "." .. key] = v
      else
        section = nil
        local v, why = scalar(rest, where)
        if v == nil then return nil, why end
        out[key] = v
      end
    end
  end
  return out
end

-- read(path) -> flat table of the file's keys, or nil, why
function M.read(path)
  local text = fs.read(path)
  if not text then return nil, "cannot read " .. path end
  if text:match("^%s*{") then
    local t, why = json.decode(text)
    if type(t) ~= "table" then return nil, path .. ": " .. tostring(why or "not a JSON object") end
    local flat = {}
    for k, v in pairs(t) do
      if type(v) == "table" and not json.is_array(v) then
        for k2, v2 in pairs(v) do flat[k .. "." .. k2] = v2 end
      else
        flat[k] = v
      end
    end
    return flat
  end
  return M.parse_yaml(text, path)
end

-- to_argv(flat, spec, path) -> argv of the options the file sets (sorted, for one order), notes
-- (KernelAgent keys with no counterpart), or nil, why (a key that is neither ours nor KA's)
function M.to_argv(flat, spec, path)
  local keys = keys_lib.sorted(flat)
  local argv, notes, names = {}, {}, keys_lib.sorted(spec)
  for _, k in ipairs(keys) do
    local v = flat[k]
    local name = k:gsub("_", "-")
    local ka = M.KA[k]
    if ka then
      name = ka[1]
      if ka[2] and ka[2][v] then v = ka[2][v] end
    end
    local s = spec[name]
    if name == "config" or name == "resume" then
      return nil, string.format("%s: '%s' cannot be set from a config file", path, k)
    elseif s then
      if v == json.null then  -- luacheck: ignore 542 (nothing set: the default stays)
      elseif s.type == "boolean" then
        if v ~= true and v ~= false then return nil, string.format("%s: %s must be true or false", path, k) end
        if v then argv[#argv + 1] = "--" .. name end
      elseif type(v) == "table" then
        return nil, string.format("%s: %s must be a single value", path, k)
      else
        argv[#argv + 1] = "--" .. name .. "=" .. tostring(v)
      end
    elseif M.KA_IGNORED[k] or k:match("^strategy_config%.") then
      notes[#notes + 1] = k .. " (" .. (M.KA_IGNORED[k] or "no setting here") .. ")"
    else
      local tip = require("agents.run.args").suggest(name, names)
      return nil, string.format("%s: unknown key '%s'%s", path, k, tip and ("; did you mean '" .. tip .. "'?") or "")
    end
  end
  return argv, notes
end

-- merge(opts, spec, how) -> opts with the values of opts.config that the command line did not
-- give (they count as given: a --resume keeps them), or nil, why. Notes go to stderr.
function M.merge(opts, spec, how)
  local flat, why = M.read(opts.config)
  if not flat then return nil, "--config: " .. why end
  local argv, notes = M.to_argv(flat, spec, opts.config)
  if not argv then return nil, "--config " .. notes end
  local from, err = require("agents.run.args").parse(argv, spec, { prog = how and how.prog })
  if not from then return nil, "--config " .. opts.config .. ": " .. err end
  for k in pairs(from._given) do
    if not opts._given[k] then opts[k], opts._given[k] = from[k], true end
  end
  if #notes > 0 then
    io.stderr:write(string.format("%s: --config %s: KernelAgent settings with no counterpart here, ignored: %s\n",
      how and how.prog or "kagent-rt", opts.config, table.concat(notes, ", ")))
  end
  return opts
end

return M
