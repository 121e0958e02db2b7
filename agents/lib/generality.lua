-- Whether a kernel works beyond the problem's own shapes, in the words every place that shows a
-- best kernel uses: the run's last line (agents/search/summary.lua), report.html, the bench and
-- sweep tables. The fact comes from the evaluator's resized-problem check (the confirmation's
-- `generalize`: result.generalizes "yes" / "no" / "n/a", and for "no" result.generalization, a
-- list of {sizes = {NAME = value}, reason}); this file only words it.
local keys = require("agents.lib.keys")

local M = {}

M.PREFIX = "only at the problem's shapes"

-- sizes_text(sizes) -> "batch_size=9, dim=33", or nil where no sizes were recorded
local function sizes_text(sizes)
  if type(sizes) ~= "table" then return nil end
  local parts = {}
  for _, name in ipairs(keys.sorted(sizes)) do parts[#parts + 1] = name .. "=" .. tostring(sizes[name]) end
  return #parts > 0 and table.concat(parts, ", ") or nil
end

-- label(generalizes, failures[, long]) -> nil where the kernel generalizes or was not checked;
-- else "only at the problem's shapes: fails at batch_size=9" from the first failure recorded,
-- and with long its reason too (the evaluator's words, cut to 160 characters)
function M.label(generalizes, failures, long)
  if generalizes ~= "no" then return nil end
  local first = type(failures) == "table" and type(failures[1]) == "table" and failures[1] or {}
  local at = sizes_text(first.sizes)
  local text = M.PREFIX .. ": " .. (at and ("fails at " .. at) or "fails on the problem resized")
  if long and type(first.reason) == "string" and first.reason ~= "" then
    text = text .. " (" .. first.reason:gsub("%s+", " "):sub(1, 160) .. ")"
  end
  return text
end

-- of_summary(s[, long]) -> label of a run's summary.json (its generalizes and generalization)
function M.of_summary(s, long)
  if type(s) ~= "table" then return nil end
  return M.label(s.generalizes, s.generalization, long)
end

return M
