return require("agents.lib.renamed")("agents.lib.promotion", "agents.search.promotion")
