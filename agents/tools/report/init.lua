-- The HTML reports (self-contained pages: every library inlined, no network needed to open them):
--   run_page(run_dir)      report.html of one run
--   runs_index(folder)     index.html of a folder of runs (runs/index.html)
--   sweep_index(sweep_dir) index.html of a sweep folder
-- Each returns the page's path, or nil and why. agents/report.lua rebuilds them by hand; the
-- search driver writes a run's page and its folder's index at the end of every run.
local M = {}

function M.run_page(dir) return require("agents.tools.report.run_page").write(dir) end

function M.runs_index(folder) return require("agents.tools.report.index_page").write_runs(folder) end

function M.sweep_index(dir) return require("agents.tools.report.index_page").write_sweep(dir) end

return M
