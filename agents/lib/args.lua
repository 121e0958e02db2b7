-- Command-line options for agent scripts: `--name value`, `--name=value`, `--flag`.
-- A spec maps each option to {default=, type="string"|"number"|"boolean", help=}; unknown options
-- are errors so a typo never silently runs an eight-round job with defaults.
local M = {}

local function convert(name, spec, raw)
  if spec.type == "number" then
    local n = tonumber(raw)
    if not n then return nil, string.format("--%s expects a number, got %q", name, tostring(raw)) end
    return n
  elseif spec.type == "boolean" then
    if raw == true or raw == "true" or raw == "1" or raw == "yes" then return true end
    if raw == "false" or raw == "0" or raw == "no" then return false end
    return nil, string.format("--%s expects true/false, got %q", name, tostring(raw))
  end
  return raw
end

-- parse(argv, spec) -> opts (defaults filled, plus opts._positional) or nil, message.
function M.parse(argv, spec)
  local opts, pos = {}, {}
  for name, s in pairs(spec) do
    if s.default ~= nil then opts[name:gsub("-", "_")] = s.default end
  end
  local i = 1
  while i <= #argv do
    local a = argv[i]
    if a == "-h" or a == "--help" then
      opts.help = true
    elseif a:sub(1, 2) == "--" then
      local name, val = a:match("^%-%-([%w%-_]+)=(.*)$")
      name = name or a:sub(3)
      local s = spec[name]
      if not s then return nil, "unknown option --" .. name end
      if val == nil then
        if s.type == "boolean" then
          local nxt = argv[i + 1]
          if nxt == "true" or nxt == "false" then val = nxt; i = i + 1 else val = true end
        else
          val = argv[i + 1]
          if val == nil then return nil, "--" .. name .. " needs a value" end
          i = i + 1
        end
      end
      local v, err = convert(name, s, val)
      if v == nil then return nil, err end
      opts[name:gsub("-", "_")] = v
    else
      pos[#pos + 1] = a
    end
    i = i + 1
  end
  for name, s in pairs(spec) do
    if s.required and opts[name:gsub("-", "_")] == nil and not opts.help then
      return nil, "--" .. name .. " is required"
    end
  end
  opts._positional = pos
  return opts
end

-- usage(prog, spec) -> help text, options sorted by name.
function M.usage(prog, spec)
  local names = {}
  for n in pairs(spec) do names[#names + 1] = n end
  table.sort(names)
  local lines = { "usage: kagent-rt " .. prog .. " [options]" }
  for _, n in ipairs(names) do
    local s = spec[n]
    local d = s.default ~= nil and (" (default " .. tostring(s.default) .. ")") or ""
    lines[#lines + 1] = string.format("  --%-14s %s%s", n, s.help or "", d)
  end
  return table.concat(lines, "\n")
end

return M
