-- kagent.time: clocks.
local native = require("kagent.native")

local M = {}

--- Monotonic seconds (float), for measuring intervals.
M.now = native.time.now
--- Unix time in seconds (float).
M.wall = native.time.wall

return M
