-- Finds the integer knobs of a kernel's source (block sizes, num_warps, num_stages, chunk sizes,
-- including those inside triton.Config lists) and rewrites one of them. Text-level on purpose:
-- the tuner must work on any kernel file without importing it.
local M = {}

local KNOB = { "BLOCK", "SIZE", "TILE", "WARPS", "STAGES", "CHUNK", "ROWS", "GROUP", "SPLIT", "VEC", "UNROLL" }

local function is_knob(name)
  if name == "num_warps" or name == "num_stages" then return true end
  if not name:match("^[A-Z][A-Z0-9_]*$") then return false end
  for _, k in ipairs(KNOB) do if name:find(k, 1, true) then return true end end
  return false
end

-- find(code) -> array of {name, value, s, e (byte range of the number), line, kind}
function M.find(code)
  local out, seen = {}, {}
  local line_starts = { 1 }
  for pos in code:gmatch("()\n") do line_starts[#line_starts + 1] = pos + 1 end
  local function line_of(pos)
    local lo, hi = 1, #line_starts
    while lo < hi do
      local mid = math.floor((lo + hi + 1) / 2)
      if line_starts[mid] <= pos then lo = mid else hi = mid - 1 end
    end
    return lo
  end
  local function add(name, s, num, kind)
    if seen[s] then return end
    seen[s] = true
    local v = tonumber(num)
    if not v or v < 1 then return end
    out[#out + 1] = { name = name, value = v, s = s, e = s + #num - 1, line = line_of(s), kind = kind }
  end
  -- module-level constants: NAME = 128 (at column 0; skip `def`/indented code)
  for ls, name, num_s, num in code:gmatch("()([A-Z][A-Z0-9_]*)%s*=%s*()(%d+)%s*[\n#]") do
    if (ls == 1 or code:sub(ls - 1, ls - 1) == "\n") and is_knob(name) then add(name, num_s, num, "constant") end
  end
  -- keyword arguments: BLOCK_SIZE=1024, num_warps=4 (launch calls, triton.Config)
  for name, num_s, num in code:gmatch("([%a_][%w_]*)%s*=%s*()(%d+)") do
    if is_knob(name) then add(name, num_s, num, "keyword") end
  end
  -- dict entries in triton.Config({'BLOCK_SIZE': 1024})
  for name, num_s, num in code:gmatch("[\"']([%a_][%w_]*)[\"']%s*:%s*()(%d+)") do
    if is_knob(name) then add(name, num_s, num, "config") end
  end
  table.sort(out, function(a, b) return a.s < b.s end)
  return out
end

-- apply(code, t, value) -> code with tunable t's number replaced by value.
function M.apply(code, t, value)
  return code:sub(1, t.s - 1) .. string.format("%d", value) .. code:sub(t.e + 1)
end

-- neighbours(t, hint) -> candidate values to try next, most promising first. hint: "up"|"down"|nil.
function M.neighbours(t, hint)
  local v = t.value
  local c = {}
  if t.name == "num_warps" then
    for _, w in ipairs({ v * 2, v / 2 }) do if w >= 1 and w <= 32 then c[#c + 1] = w end end
  elseif t.name == "num_stages" then
    for _, s in ipairs({ v + 1, v - 1 }) do if s >= 1 and s <= 6 then c[#c + 1] = s end end
  else
    for _, b in ipairs({ v * 2, math.floor(v / 2) }) do if b >= 1 and b <= 65536 then c[#c + 1] = b end end
  end
  if hint == "down" and #c == 2 then c[1], c[2] = c[2], c[1] end
  return c
end

-- settings(code) -> its knobs as text, "BLOCK_M=8 NUM_WARPS=4", in file order
function M.settings(code)
  local parts = {}
  for _, t in ipairs(M.find(code)) do parts[#parts + 1] = t.name .. "=" .. t.value end
  return table.concat(parts, " ")
end

-- variants(code, n) -> up to n distinct sources other than code, {code, knobs = settings}, nearest
-- first: breadth-first over single-knob moves (neighbours), so one move, then two, and so on.
-- A fixed set of knob variants without a search (benchmarks of the pool's throughput).
function M.variants(code, n)
  local out, seen, frontier = {}, { [code] = true }, { code }
  while #frontier > 0 and #out < n do
    local next_frontier = {}
    for _, src in ipairs(frontier) do
      for _, t in ipairs(M.find(src)) do
        for _, v in ipairs(M.neighbours(t)) do
          local c = M.apply(src, t, v)
          if not seen[c] then
            seen[c] = true
            out[#out + 1] = { code = c, knobs = M.settings(c) }
            if #out >= n then return out end
            next_frontier[#next_frontier + 1] = c
          end
        end
      end
    end
    frontier = next_frontier
  end
  return out
end

-- hints(hits) -> {knob name = "up"|"down"} from retrieved skills' `tunables`: the best-ranked
-- skill that names a knob decides
function M.hints(hits)
  local h = {}
  for _, hit in ipairs(hits) do
    for name, dir in pairs(hit.skill.tunables or {}) do
      if h[name] == nil and (dir == "up" or dir == "down") then h[name] = dir end
    end
  end
  return h
end

-- signature(change) -> the plan signature of a knob change, as memory records it
function M.signature(ch)
  return string.format("%s@%d=%d", ch.name, ch.line, ch.to)
end

-- candidates(code, hints, limit, tried) -> {{code, change = {name, line, from, to, hint}}}: the
-- neighbours of every knob, those a skill hint points at first, then in file order, skipping
-- changes tried(signature) says were tried before and sources already in the list.
function M.candidates(code, hints, limit, tried)
  local ts = M.find(code)
  table.sort(ts, function(a, b)
    local ha, hb = hints[a.name] and 1 or 0, hints[b.name] and 1 or 0
    if ha ~= hb then return ha > hb end
    return a.s < b.s
  end)
  local out, seen = {}, {}
  for _, t in ipairs(ts) do
    for _, v in ipairs(M.neighbours(t, hints[t.name])) do
      local ch = { name = t.name, line = t.line, from = t.value, to = v, hint = hints[t.name] }
      local c = M.apply(code, t, v)
      if not seen[c] and not (tried and tried(M.signature(ch))) then
        seen[c] = true
        out[#out + 1] = { code = c, change = ch }
        if #out >= limit then return out end
      end
    end
  end
  return out
end

return M
