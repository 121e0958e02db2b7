return require("agents.lib.renamed")("agents.lib.search", "agents.search.driver")
