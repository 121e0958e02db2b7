-- --config FILE: options from a file. Keys are the long option names (`rounds`, `max-cv` or
-- `max_cv`); KernelAgent's keys are accepted where they mean the same (KA below); options given
-- on the command line win. The file is JSON (it starts with "{") or YAML (kagent.yaml, yaml-cpp):
-- KernelAgent's configs (examples/configs/*.yaml there) load as they are written. Its section
-- `strategy_config:` is read one level down ("strategy_config.key"); its `models:` list becomes
-- --model worker=A,B,C; its keys with no meaning here (`platform:`, `num_workers`...) are named
-- once, in one line, as ignored.
-- The merged options are the run's (state.json's `opts`), which --resume uses without the file.
local fs = require("kagent.fs")
local keys_lib = require("agents.lib.keys")
local json = require("kagent.json")
local yaml = require("kagent.yaml")

local M = {}

-- KernelAgent's configuration keys -> ours, with its values translated where they differ.
M.KA = {
  strategy = { "policy", { beam_search = "beam", greedy = "greedy" } },
  ["strategy_config.num_top_kernels"] = { "beam" },
  ["strategy_config.candidate_pool_size"] = { "beam" },
  ["strategy_config.num_bottlenecks"] = { "directions" },
  ["strategy_config.max_no_improvement"] = { "plateau" },
  openai_model = { "model" },
}
-- KernelAgent's list of models (each worker of a round takes the next): our worker mixture.
M.KA_MODELS = { ["strategy_config.models"] = true, models = true }
-- KernelAgent's keys with no counterpart here: named in a note, not an error. Any other
-- strategy_config.* key is one of its search settings, named the same way.
M.KA_IGNORED = { num_workers = "workers follow --beam x --directions", high_reasoning_effort = "no setting here",
  benchmark_warmup = "timing is adaptive", benchmark_repeat = "timing is adaptive",
  divergence_threshold = "no setting here", target_platform = "the device is found",
  gpu_name = "the device is found", platform = "the device is found" }
-- Sections read one level down; any other mapping is one value (refused, or ignored whole).
M.SECTIONS = { strategy_config = true }

local function is_map(v)
  return type(v) == "table" and not json.is_array(v) and next(v) ~= nil
end

-- decode(text, path) -> the file's table, or nil, why ("path:LINE:COL: what" for YAML)
local function decode(text, path)
  if text:match("^%s*{") then
    local t, why = json.decode(text)
    if type(t) ~= "table" then return nil, path .. ": " .. tostring(why or "not a JSON object") end
    return t
  end
  local t, why = yaml.decode(text)
  if t == nil then return nil, path .. ":" .. tostring(why):gsub("^EPARSE: ", "") .. " (not valid YAML)" end
  if t == yaml.null then return {} end  -- only comments: nothing set
  if not is_map(t) then
    return nil, path .. ": expected 'option: value' lines at the top level, found a " .. (type(t) == "table" and "list" or "single value")
  end
  return t
end

-- read(path) -> flat table {key or "section.key" = value}, or nil, why
function M.read(path)
  local text = fs.read(path)
  if not text then return nil, "cannot read " .. path end
  local t, why = decode(text, path)
  if not t then return nil, why end
  local flat = {}
  for k, v in pairs(t) do
    if M.SECTIONS[k] and is_map(v) then
      for k2, v2 in pairs(v) do flat[k .. "." .. k2] = v2 end
    else
      flat[k] = v
    end
  end
  return flat
end

-- models_value(v, k, path) -> "worker=A,B,C" from KernelAgent's list of model names, or nil, why
local function models_value(v, k, path)
  if type(v) == "string" then v = { v } end
  if type(v) ~= "table" or not json.is_array(v) then
    return nil, string.format("%s: %s must be a list of model names", path, k)
  end
  for _, m in ipairs(v) do
    if type(m) ~= "string" or m:find("[,=*]") then
      return nil, string.format("%s: %s: '%s' is not a model name", path, k, tostring(m))
    end
  end
  return "worker=" .. table.concat(v, ",")
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
    if M.KA_MODELS[k] then
      local value, why = models_value(v, k, path)
      if not value then return nil, why end
      argv[#argv + 1] = "--model=" .. value
    elseif name == "config" or name == "resume" then
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
