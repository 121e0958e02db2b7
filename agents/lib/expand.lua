return require("agents.lib.renamed")("agents.lib.expand", "agents.search.expand")
