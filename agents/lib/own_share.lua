-- The own-kernel share of a verdict's GPU time and the library kernels that carried the rest, as
-- every table shows them: agents/bench.lua's, a sweep's table.md, the run page and a run's last
-- line. The evaluator records them whatever the library policy (src/gpu/eval/README.md: own_share,
-- library_kernels, or own_share_unknown with its reason), so a figure carried by cuBLAS is never
-- taken for a kernel's. Rows, summaries and verdicts carry them under those same three keys.
local json = require("kagent.json")

local M = {}

-- under this share a row's figure is carried by library kernels: its cell is marked
M.LIBRARY_CARRIED = 0.5
M.MARK = "*"
M.SHOWN = 3  -- library kernels named in one line; the JSON keeps them all

M.DEFINITION = "the share of the kernel's GPU time in its own kernels (0..1: the evaluator's kernel audit of its verdict, "
  .. "own_share, whatever the library policy); the rest ran in library kernels (cuBLAS, cuDNN, CUTLASS, ATen's), "
  .. "named in library_kernels; \"?\" where no kernel was profiled (CPU mode, a job without the audit), the reason in "
  .. "own_share_unknown; under " .. M.LIBRARY_CARRIED .. " the cell is marked " .. M.MARK
  .. ": the figure is carried by library kernels, not by the kernel's own code"

local function name_of(k) return type(k) == "table" and tostring(k.name) or tostring(k) end

-- copy(dst, src, absent) -> dst with src's own_share (or own_share_unknown: src's reason, else
-- `absent`) and library_kernels (names; [] where none). src: a verdict, a summary, nil.
function M.copy(dst, src, absent)
  src = type(src) == "table" and src or {}
  local names = {}
  for _, k in ipairs(type(src.library_kernels) == "table" and src.library_kernels or {}) do names[#names + 1] = name_of(k) end
  if type(src.own_share) == "number" then
    dst.own_share = src.own_share
  else
    dst.own_share_unknown = type(src.own_share_unknown) == "string" and src.own_share_unknown
      or absent or "not recorded (made before the share was)"
  end
  dst.library_kernels = #names > 0 and names or json.empty_array
  return dst
end

-- carried_by_library(r) -> true where r's own kernels carry under LIBRARY_CARRIED of its GPU time
function M.carried_by_library(r)
  return type(r) == "table" and type(r.own_share) == "number" and r.own_share < M.LIBRARY_CARRIED
end

-- cell(r) -> the table's "own" cell: "0.23", "0.21*" (carried by library kernels), "?" (unknown,
-- its reason in own_share_unknown), "-" (a row with no verdict: a run that did not finish)
function M.cell(r)
  if type(r) ~= "table" then return "-" end
  if type(r.own_share) ~= "number" then return type(r.own_share_unknown) == "string" and "?" or "-" end
  return string.format("%.2f", r.own_share) .. (M.carried_by_library(r) and M.MARK or "")
end

-- names(r) -> r's library kernels, the first SHOWN of them joined: "a, b, c, ..." ("" where none)
function M.names(r)
  local out = {}
  for i, k in ipairs(type(r) == "table" and type(r.library_kernels) == "table" and r.library_kernels or {}) do
    if i > M.SHOWN then out[#out + 1] = "..."; break end
    out[#out + 1] = name_of(k)
  end
  return table.concat(out, ", ")
end

-- notes(rows, label) -> the lines under a table: per row with library kernels "- row 2 (p):
-- 79% of the GPU time in library kernels: a, b", each unknown share's reason once with its rows,
-- and what the mark means where a cell has it. label(row, i) names the row.
function M.notes(rows, label)
  local out, unknown, order, marked = {}, {}, {}, false
  for i, r in ipairs(rows) do
    local names = M.names(r)
    if type(r.own_share) == "number" and names ~= "" then
      out[#out + 1] = string.format("- %s: %.0f%% of the GPU time in library kernels: %s", label(r, i),
        100 * (1 - r.own_share), names)
    elseif type(r.own_share_unknown) == "string" then
      local why = r.own_share_unknown
      if not unknown[why] then unknown[why] = {}; order[#order + 1] = why end
      unknown[why][#unknown[why] + 1] = label(r, i)
    end
    marked = marked or M.carried_by_library(r)
  end
  for _, why in ipairs(order) do
    out[#out + 1] = string.format("- own ? for %s: %s", table.concat(unknown[why], ", "), why)
  end
  if marked then
    out[#out + 1] = string.format("- %s own share under %.1f: the row's figure is carried by library kernels, not by "
      .. "the kernel's own code (the library policy, --library: docs/agents.md)", M.MARK, M.LIBRARY_CARRIED)
  end
  return out
end

M.TITLE = "Own share of the GPU time (column own) and the library kernels:"

return M
