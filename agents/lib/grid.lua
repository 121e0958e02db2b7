-- grid(header, rows, {markdown}) -> a table as text: columns padded to their widest cell for a
-- terminal (columns of figures right-aligned, a rule under the header), or a Markdown table
-- with --markdown (docs/results/ and issue comments take it as is).
local M = {}

local function numeric(s) return s:match("^[%d%.%-]") ~= nil end

local function width(s)  -- display width: UTF-8 continuation bytes take no column
  return #s:gsub("[\128-\191]", "")
end

function M.render(header, rows, o)
  if o and o.markdown then
    local sep = {}
    for i = 1, #header do sep[i] = "---" end
    local out = { "| " .. table.concat(header, " | ") .. " |", "|" .. table.concat(sep, "|") .. "|" }
    for _, r in ipairs(rows) do out[#out + 1] = "| " .. table.concat(r, " | ") .. " |" end
    return table.concat(out, "\n")
  end
  local w, right = {}, {}
  for i, h in ipairs(header) do w[i], right[i] = width(h), i > 1 end
  for _, r in ipairs(rows) do
    for i, c in ipairs(r) do
      w[i] = math.max(w[i] or 0, width(c))
      -- a column of figures ("-" where none) is right-aligned, its header too
      if not (numeric(c) or c == "-") then right[i] = false end
    end
  end
  local function line(cells)
    local out = {}
    for i, c in ipairs(cells) do
      local pad = (" "):rep(w[i] - width(c))
      out[i] = right[i] and (pad .. c) or (c .. pad)
    end
    return (table.concat(out, "  "):gsub("%s+$", ""))
  end
  local rule = {}
  for i = 1, #header do rule[i] = ("-"):rep(w[i]) end
  local out = { line(header), table.concat(rule, "  ") }
  for _, r in ipairs(rows) do out[#out + 1] = line(r) end
  return table.concat(out, "\n")
end

return M
