-- kagent.llm against local OpenAI-compatible servers: the fake provider server
-- (tests/fixtures/fake_llm, a fake on loopback) shaped like vLLM and like llama.cpp's server.
-- KAGENT_MODEL may be left out when the server serves one model.
local fake = dofile(kagent.root .. "/tests/fixtures/fake_llm/fake.lua")

local h = fake.cases{ python = spec.python }
local run, server = h.run, h.server

local function local_env(extra) return h.env("local", extra) end

local TWO_CALLS = [[
  local ok, which = kagent.llm.configured()
  local a, err, code = kagent.llm.chat{ messages = { { role = "user", content = "one" } } }
  local b = kagent.llm.chat{ messages = { { role = "user", content = "two" } } }
  print(kagent.json.encode({ ok = ok, which = which, a = a, b = b, err = err, code = code, models = kagent.llm.models() }))
]]

describe("llm with a local server", function()
  local served = { vllm = "Qwen/Qwen2.5-Coder-7B-Instruct", llamacpp = "qwen2.5-coder-7b-instruct-q4_k_m.gguf" }
  for _, flavor in ipairs({ "vllm", "llamacpp" }) do
    it("uses the one model a " .. flavor .. "-style server lists when KAGENT_MODEL is unset", function()
      server({ replies = { { text = "local ok" } } }, flavor)
      local out = run(TWO_CALLS, local_env())
      expect.eq(out.err, nil)
      expect.eq(out.ok, true)
      expect.eq(out.which, "openai:" .. served[flavor])
      expect.eq(out.a.text, "local ok")
      expect.eq(out.a.model, served[flavor])
      expect.same(out.models, { served[flavor] })
      expect.eq(out.a.cost_usd, 0)
      local st = h.srv:stats(true)
      expect.eq(st.bodies[1].model, served[flavor], "the request named the served model")
      expect.eq(st.requests["/v1/models"], 1, "asked once per run")
    end)
  end

  it("lists the served models when there are several and none is named", function()
    server({ models = { "qwen-7b", "qwen-32b", "llama-70b" } }, "vllm")
    local out = run(TWO_CALLS, local_env())
    expect.eq(out.ok, false)
    expect.match(out.which, "KAGENT_MODEL is not set")
    expect.match(out.which, "serves 3 models: qwen%-7b, qwen%-32b, llama%-70b")
    expect.eq(out.code, "ENOTSUP")
    expect.match(out.err, "qwen%-32b")
    expect.eq(h.srv:stats().requests["/v1/chat/completions"], nil, "no chat request was sent")
    -- Named, it is used without asking.
    local named = run(TWO_CALLS, local_env({ KAGENT_MODEL = "qwen-32b" }))
    expect.eq(named.a.model, "qwen-32b")
  end)

  it("passes a vLLM-style error through and names the served models on a 404", function()
    server({}, "vllm")
    local out = run(TWO_CALLS, local_env({ KAGENT_MODEL = "openai:qwen-typo" }))
    expect.eq(out.code, "ENOTFOUND")
    expect.match(out.err, "The model `qwen%-typo` does not exist%.")
    expect.match(out.err, "the server lists: Qwen/Qwen2%.5%-Coder%-7B%-Instruct")
  end)

  it("says which server did not answer when it cannot list its models", function()
    server({ models_reply = { fault = "hang" } }, "llamacpp")
    local out = run([[
      kagent.llm.configure{ timeout = 0.5, idle_timeout = 0.2, backoff = { base = 0.05, max = 0.1 } }
    ]] .. TWO_CALLS, local_env())
    expect.eq(out.ok, false)
    expect.match(out.which, "listing the models at http://127%.0%.0%.1:%d+/v1/models")
    expect.match(out.which, "set KAGENT_MODEL")
    expect.eq(out.code, "ETIMEDOUT")
  end)
end)

describe("llm local teardown", function()
  after_all(function() h.stop() end)
end)
