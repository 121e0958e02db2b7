-- llm.check: the one request that tells, before any work, whether the LLM server takes the key and
-- serves the models a run names (issue #57). Against the FAKE provider server
-- (tests/fixtures/fake_llm, a fake on loopback) on its OpenAI route (plain, vLLM-shaped) and its
-- Anthropic route; each case runs a fresh kagent-rt with its own environment.
local fake = dofile(kagent.root .. "/tests/fixtures/fake_llm/fake.lua")

local h = fake.cases{ python = spec.python, key = "sk-ant-test-check-0123456789" }
local run, server = h.run, h.server

-- CHECK:format(models) -> a case that runs llm.check(models) and prints what it answered
local CHECK = [[
  local ok, err, code = kagent.llm.check(%s)
  print(kagent.json.encode({ ok = ok, err = err, code = code }))
]]

local function openai_env(extra)
  local e = h.env("local", { OPENAI_API_KEY = "sk-test-check" })
  for k, v in pairs(extra or {}) do e[k] = v end
  return e
end

describe("llm.check", function()
  it("passes where the server lists the model, asking once for several models of one server", function()
    local srv = server({ replies = { { model = "fake-b", text = "b" } } })
    local out = run(CHECK:format('{ "openai:fake", "openai:fake-b" }'), openai_env({ KAGENT_MODEL = "openai:gpt-4.1" }))
    expect.eq(out.err, nil)
    expect.eq(out.ok, true)
    local st = srv:stats()
    expect.eq(st.requests["/v1/models"], 1, "one model list for the three models")
    expect.eq(st.requests["/v1/chat/completions"], nil, "no model call")
  end)

  it("takes a model name without its tag where the server lists it as name:latest (Ollama)", function()
    server({ models = { "qwen2.5-coder:latest", "llama3.1:8b" } })
    expect.eq(run(CHECK:format("nil"), openai_env({ KAGENT_MODEL = "openai:qwen2.5-coder" })).ok, true)
    expect.eq(run(CHECK:format("nil"), openai_env({ KAGENT_MODEL = "openai:llama3.1" })).code, "ENOTFOUND",
      "only :latest is implied")
  end)

  it("a refused key (401): EAUTH naming the key's variable, never the key", function()
    local srv = server({})
    local out = run(CHECK:format("nil"), openai_env({ OPENAI_API_KEY = "bad", KAGENT_MODEL = "openai:fake" }))
    expect.eq(out.ok, nil)
    expect.eq(out.code, "EAUTH")
    expect.match(out.err, "refused the API key in OPENAI_API_KEY %(HTTP 401%)")
    expect.eq(srv:stats().auth_failures, 1)
    -- a server that wants a key where none is set: the variable to set
    local none = run(CHECK:format("nil"), openai_env({ OPENAI_API_KEY = false, KAGENT_MODEL = "openai:fake" }))
    expect.eq(none.code, "EAUTH")
    expect.match(none.err, "wants an API key %(HTTP 401%).*; set OPENAI_API_KEY")
  end)

  it("a key allowed to chat but not to list models (403): EAUTH, naming the way to skip the check", function()
    server({ models_reply = { status = 403, error_message = "missing scope model.read" } })
    local out = run(CHECK:format("nil"), openai_env({ KAGENT_MODEL = "openai:fake" }))
    expect.eq(out.code, "EAUTH")
    expect.match(out.err, "HTTP 403")
    expect.match(out.err, "KAGENT_LLM_CHECK=0 skips this check")
  end)

  it("a model the server does not list (404 on vLLM): ENOTFOUND naming the models it lists", function()
    server({}, "vllm")
    local out = run(CHECK:format("nil"), h.env("local", { KAGENT_MODEL = "openai:qwen-typo" }))
    expect.eq(out.code, "ENOTFOUND")
    expect.match(out.err, "does not serve the model 'qwen%-typo'")
    expect.match(out.err, "it lists Qwen/Qwen2%.5%-Coder%-7B%-Instruct")
    -- one model of a mixture that is not served is found as well
    server({})
    local mixed = run(CHECK:format('{ "openai:fake", "openai:not-served" }'), openai_env({ KAGENT_MODEL = "openai:fake" }))
    expect.eq(mixed.code, "ENOTFOUND")
    expect.match(mixed.err, "'not%-served'")
  end)

  it("a URL without /v1: ENOTFOUND suggesting it, with or without a model named, and no 'nil'", function()
    server({})
    for _, model in ipairs({ "openai:fake", false }) do
      local env = openai_env({ KAGENT_LLM_URL = h.srv.url, KAGENT_MODEL = model })
      local out = run(CHECK:format("nil"), env)
      expect.eq(out.code, "ENOTFOUND", tostring(model))
      expect.truthy(out.err:find("try KAGENT_LLM_URL=" .. h.srv.url .. "/v1", 1, true), out.err)
      expect.falsy(out.err:find("nil", 1, true), out.err)
      -- configured() asks the list when no model is named: the same words
      local conf = run([[print(kagent.json.encode({ kagent.llm.configured() }))]], env)
      expect.falsy(kagent.json.encode(conf):find("'nil'", 1, true), kagent.json.encode(conf))
    end
    local listed = run(CHECK:format("nil"), openai_env({ KAGENT_LLM_URL = h.srv.url, KAGENT_MODEL = "openai:fake" }))
    expect.match(listed.err, "KAGENT_LLM_CHECK=0 skips this check", "the way out where a server has no model list")
  end)

  it("a server whose model list does not come: a transport failure within the limits", function()
    server({ models_reply = { fault = "hang" } })
    local out = run([[kagent.llm.configure{ start_timeout = 0.3, retries = 0 }]] .. CHECK:format("nil"),
      openai_env({ KAGENT_MODEL = "openai:fake" }))
    expect.eq(out.code, "ETIMEDOUT", tostring(out.err))
  end)

  it("on Anthropic's route: an alias is served, an unknown model is named with the list, a bad key is EAUTH", function()
    local srv = server({})
    expect.eq(run(CHECK:format("nil")).ok, true, "claude-sonnet-4-5 names claude-sonnet-4-5-20250929")
    local out = run(CHECK:format('{ "anthropic:claude-nope" }'))
    expect.eq(out.code, "ENOTFOUND")
    expect.match(out.err, "no model 'claude%-nope'.*it lists: claude%-sonnet%-4%-5%-20250929")
    local bad = run(CHECK:format("nil"), h.env("anthropic", { ANTHROPIC_API_KEY = "bad" }))
    expect.eq(bad.code, "EAUTH")
    expect.match(bad.err, "refused the API key in ANTHROPIC_API_KEY")
    expect.eq(srv:stats().requests["/v1/messages"], nil, "no model call")
  end)

  it("names the server's URL without the credentials or query a URL may carry", function()
    local srv = server({})
    local with_user = srv.url:gsub("^http://", "http://someone:pw-sekr3t@") .. "/v1"
    local out = run(CHECK:format("nil"), openai_env({ KAGENT_LLM_URL = with_user, KAGENT_MODEL = "openai:not-served" }))
    expect.eq(out.code, "ENOTFOUND")
    expect.match(out.err, "does not serve the model 'not%-served'")
    expect.no_match(out.err, "sekr3t")
    local dead = run(CHECK:format("nil"), openai_env({ KAGENT_LLM_URL = "http://someone:pw-sekr3t@127.0.0.1:1/v1?key=q-sekr3t",
      KAGENT_MODEL = "openai:fake" }))
    expect.eq(dead.code, "ECONNECT")
    expect.match(dead.err, "nothing listens at http://127%.0%.0%.1:1/v1 ")
    expect.no_match(dead.err, "sekr3t")
  end)

  it("a strict replay sends nothing, so checks nothing", function()
    local srv = server({})
    local out = run(CHECK:format("nil"), openai_env({ OPENAI_API_KEY = "bad", KAGENT_MODEL = "openai:fake",
      KAGENT_LLM_CACHE = "replay" }))
    expect.eq(out.ok, true)
    expect.eq(srv:stats().total_requests, 0)
  end)

  after_all(function() h.stop() end)
end)
