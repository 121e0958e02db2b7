-- agents/tune.lua: improve a kernel with no LLM — the tuner policy (agents/policies/tune.lua).
--   kagent-rt agents/tune.lua --problem P --kernel K [--rounds 8] [--tune-candidates 8]
return require("agents.lib.search").main("agents/tune.lua", kagent.args, "tune")
