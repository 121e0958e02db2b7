-- List prices in USD per million tokens (input, output, cache_read, cache_write), as published
-- by the providers when this table was written. Users override or extend it with
-- kagent.llm.configure{prices = {...}}; a model is matched exactly, else by its longest prefix
-- (so dated names such as "claude-sonnet-4-5-20250929" find "claude-sonnet-4-5").
return {
  ["claude-opus-4-1"]   = { input = 15,   output = 75,  cache_read = 1.5,   cache_write = 18.75 },
  ["claude-opus-4"]     = { input = 15,   output = 75,  cache_read = 1.5,   cache_write = 18.75 },
  ["claude-sonnet-4-5"] = { input = 3,    output = 15,  cache_read = 0.3,   cache_write = 3.75 },
  ["claude-sonnet-4"]   = { input = 3,    output = 15,  cache_read = 0.3,   cache_write = 3.75 },
  ["claude-3-7-sonnet"] = { input = 3,    output = 15,  cache_read = 0.3,   cache_write = 3.75 },
  ["claude-haiku-4-5"]  = { input = 1,    output = 5,   cache_read = 0.1,   cache_write = 1.25 },
  ["claude-3-5-haiku"]  = { input = 0.8,  output = 4,   cache_read = 0.08,  cache_write = 1 },
  ["gpt-5"]             = { input = 1.25, output = 10,  cache_read = 0.125, cache_write = 0 },
  ["gpt-5-mini"]        = { input = 0.25, output = 2,   cache_read = 0.025, cache_write = 0 },
  ["gpt-4.1"]           = { input = 2,    output = 8,   cache_read = 0.5,   cache_write = 0 },
  ["gpt-4.1-mini"]      = { input = 0.4,  output = 1.6, cache_read = 0.1,   cache_write = 0 },
  ["gpt-5-nano"]        = { input = 0.05, output = 0.4, cache_read = 0.005, cache_write = 0 },
  ["gpt-4o"]            = { input = 2.5,  output = 10,  cache_read = 1.25,  cache_write = 0 },
  ["gpt-4o-mini"]       = { input = 0.15, output = 0.6, cache_read = 0.075, cache_write = 0 },
  ["o3"]                = { input = 2,    output = 8,   cache_read = 0.5,   cache_write = 0 },
  ["o4-mini"]           = { input = 1.1,  output = 4.4, cache_read = 0.275, cache_write = 0 },
}
