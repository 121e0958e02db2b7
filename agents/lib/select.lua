return require("agents.lib.renamed")("agents.lib.select", "agents.lib.rank")
