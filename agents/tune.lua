-- agents/tune.lua: improve a kernel with no LLM — profile-guided search over its knobs.
--   kagent-rt agents/tune.lua --problem P --kernel K [--rounds 8] [--tune-candidates 8]

local run = require("agents.lib.run")

local opts, _, code = run.parse("agents/tune.lua", kagent.args)
if not opts then return code end
return require("agents.lib.tuner").main(opts)
