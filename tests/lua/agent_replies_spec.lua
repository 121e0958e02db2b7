-- Replies as models write them (agents/run/replies.lua) and the asking loop (agents/run/ask.lua)
-- with a FAKE chat that answers from a list. No Python, no network. The same failure modes come
-- from the FAKE server's quirks mode in tests/lua/agent_quirks_*_cpu_spec.lua, end to end.
package.path = kagent.root .. "/?.lua;" .. package.path
local json = kagent.json
local replies = require("agents.run.replies")
local reply_json = require("agents.run.reply_json")
local ask = require("agents.run.ask")
local reply_stats = require("agents.run.reply_stats")

local KERNEL = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x * 2"
local PARENT = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x + x\n"
-- code as read: fences end the block, so its last newline is not part of it
local function trim(s) return (tostring(s):gsub("%s+$", "")) end
local DIAG = { bottlenecks = { { summary = "two passes", recommended_fixes = { { fix = "one pass" } } } } }
local WANT = { key = "bottlenecks", schema = [[{"bottlenecks": [{"summary": "", "recommended_fixes": [{"fix": ""}]}]}]] }

describe("reading code replies", function()
  it("takes the block that defines the kernel, not a usage example or a shell block", function()
    local text = "```bash\npip install torch\n```\n```python\n" .. KERNEL .. "\n```\nUsage:\n```python\nm = ModelNew()\n```\n"
    local code, how = replies.code(text)
    expect.eq(code, KERNEL)
    expect.eq(how, "used")
  end)

  it("renames class Model to ModelNew (repaired)", function()
    local code, how = replies.code("```python\n" .. KERNEL:gsub("ModelNew", "Model") .. "    def f(self): super(Model, self)\n```")
    expect.match(code, "class ModelNew%(torch.nn.Module%)")
    expect.match(code, "super%(ModelNew, self%)")
    expect.eq(how, "repaired")
  end)

  it("applies a unified diff to the kernel it changes, wherever its line numbers point", function()
    local diff = "```diff\n--- a/k.py\n+++ b/k.py\n@@ -9,4 +9,4 @@\n class ModelNew(torch.nn.Module):\n     def forward(self, x):\n-        return x + x\n+        return x * 2\n```"
    local code, how = replies.code(diff, PARENT)
    expect.eq(trim(code), KERNEL)
    expect.eq(how, "repaired")
    local none, why, c = replies.code(diff, "print('other')\n")
    expect.eq(none, nil)
    expect.match(why, "does not apply")
    expect.eq(c, "ENOCODE")
    expect.eq(select(3, replies.code(diff, nil)), "ENOCODE", "no kernel to apply it to")
  end)

  it("drops <think> blocks, even one holding code", function()
    local code, how = replies.code("<think>\n```python\nclass ModelNew: pass\n```\n</think>\n```python\n" .. KERNEL .. "\n```")
    expect.eq(code, KERNEL)
    expect.eq(how, "used")
  end)

  it("finds no code in a refusal, an empty reply or prose in another language", function()
    for _, t in ipairs({ "I'm sorry, but I can't help with that.", "", "这个内核受内存带宽限制。" }) do
      local code, why, c = replies.code(t)
      expect.eq(code, nil)
      expect.eq(c, "ENOCODE", why)
    end
  end)

  it("takes a whole file written without fences", function()
    local code, how = replies.code("Here it is:\n" .. KERNEL)
    expect.eq(trim(code), KERNEL)
    expect.eq(how, "repaired")
  end)
end)

describe("reading JSON replies", function()
  it("reads JSON in prose or in the wrong fence as it came", function()
    for _, t in ipairs({ "Sure:\n" .. json.encode(DIAG) .. "\nHope it helps.", "```python\n" .. json.encode(DIAG) .. "\n```" }) do
      local v, how = reply_json.json(t, WANT)
      expect.eq(v.bottlenecks[1].summary, "two passes")
      expect.eq(how, "used")
    end
  end)

  it("repairs trailing commas, single quotes, Python literals and comments", function()
    local t = "```json\n{'bottlenecks': [{'summary': 'it\\'s \"two\" passes', 'ok': True, 'x': None,},], // done\n}\n```"
    local v, how = reply_json.json(t, WANT)
    expect.eq(how, "repaired")
    expect.eq(v.bottlenecks[1].ok, true)
    expect.match(v.bottlenecks[1].summary, 'two" passes')
  end)

  it("maps renamed keys back and unwraps one level of nesting", function()
    local t = json.encode({ result = { Bottlenecks = { { summary = "s", recommendedFixes = { { fix = "f" } } } } } })
    local v, how = reply_json.json(t, WANT)
    expect.eq(how, "repaired")
    expect.eq(v.bottlenecks[1].recommended_fixes[1].fix, "f")
    v = reply_json.json(json.encode({ issues = { { summary = "s" } } }), WANT)
    expect.eq(v.bottlenecks[1].summary, "s", "the only list of objects under another name")
  end)

  it("says what is missing when the JSON has another shape", function()
    local v, why, code = reply_json.json('{"answer": 42}', WANT)
    expect.eq(v, nil)
    expect.eq(code, "EPARSE")
    expect.match(why, "bottlenecks")
  end)

  it("joins a reply cut at the length limit with its continuation, also when the model opens the fence again", function()
    local full = "```json\n" .. json.encode(DIAG) .. "\n```"
    expect.eq(replies.join(full:sub(1, 30), full:sub(31)), full)
    local joined = replies.join(full:sub(1, 30), "```json\n" .. full:sub(31))
    expect.eq(reply_json.json(joined, WANT).bottlenecks[1].summary, "two passes")
  end)
end)

-- a FAKE run for the asking loop: chat answers from a list (a string, or {err, code} for a failed
-- call, or {text, truncated = true}), recording what it was sent
local function fake_run(answers)
  local sent = {}
  local run = { reply_stats = reply_stats.new(), full_prompt = function(t, s) return (s or "") .. t end }
  function run.render(name, vars) return name .. ":" .. (vars.history or "") end
  function run.chat(text, tag, shared, follow)
    sent[#sent + 1] = { text = text, follow = follow }
    local a = table.remove(answers, 1)
    if type(a) == "table" and a.err then return nil, a.err, a.code end
    if type(a) == "table" then return { text = a.text, truncated = a.truncated } end
    return { text = a or "" }
  end
  return run, sent
end

local function counts(run, role)
  local e = run.reply_stats:summary().by_role[role] or {}
  return string.format("used %d repaired %d reasked %d lost %d continued %d shortened %d", e.used or 0, e.repaired or 0,
    e.reasked or 0, e.lost or 0, e.continued or 0, e.shortened or 0)
end

describe("the asking loop", function()
  local fenced = "```python\n" .. KERNEL .. "\n```"

  it("re-asks once, quoting why, and counts the answer re-asked", function()
    local run, sent = fake_run({ "I'm sorry, I can't help.", fenced })
    local a = ask.code(run, { tag = "optimize", template = "optimize", vars = {} })
    expect.eq(a.code, KERNEL)
    expect.eq(#sent, 2)
    expect.eq(sent[2].follow[1].role, "assistant")
    expect.match(sent[2].follow[2].content, "^Your reply could not be used: ENOCODE")
    expect.eq(counts(run, "optimize"), "used 0 repaired 0 reasked 1 lost 0 continued 0 shortened 0")
  end)

  it("loses a reply that is still unusable after the re-ask: ENOCODE, not a kernel failure", function()
    local run = fake_run({ "", "还是没有代码" })
    local a = ask.code(run, { tag = "generate", template = "generate", vars = {} })
    expect.eq(a.code, nil)
    expect.eq(a.llm_code, "ENOCODE")
    expect.eq(counts(run, "generate"), "used 0 repaired 0 reasked 0 lost 1 continued 0 shortened 0")
  end)

  it("continues a reply cut at the length limit and joins the parts (repaired)", function()
    local run, sent = fake_run({ { text = fenced:sub(1, 40), truncated = true }, fenced:sub(41) })
    local a = ask.code(run, { tag = "refine", template = "refine", vars = {} })
    expect.eq(a.code, KERNEL)
    expect.match(sent[2].follow[2].content, "^Your reply was cut off")
    expect.eq(counts(run, "refine"), "used 0 repaired 1 reasked 0 lost 0 continued 1 shortened 0")
  end)

  it("asks again without history after a context-length error (repaired); a prompt with nothing to leave out fails as a call", function()
    local ctx = { err = "EBADREQ: openai rejected the request (HTTP 400): This model's maximum context length is 8192 tokens", code = "EBADREQ" }
    local run, sent = fake_run({ ctx, fenced })
    local a = ask.code(run, { tag = "optimize", template = "optimize", vars = { history = "a long history" } })
    expect.eq(a.code, KERNEL)
    expect.eq(sent[2].text, "optimize:" .. replies.LEFT_OUT)
    expect.eq(counts(run, "optimize"), "used 0 repaired 1 reasked 0 lost 0 continued 0 shortened 1")
    run = fake_run({ ctx })
    a = ask.json(run, { tag = "route", template = "route", vars = { graph = "g" }, want = { fields = { "route" } } })
    expect.eq(a.value, nil)
    expect.eq(a.llm_code, "EBADREQ")
    expect.eq(counts(run, "route"), "used 0 repaired 0 reasked 0 lost 0 continued 0 shortened 0")
  end)

  -- issue #53, item 3: a reply over a size limit is a failed reply, kept nowhere and never resent
  it("loses a kernel over --max-code-bytes: counted, not kept in the reply file, not sent back with the re-ask", function()
    local big = "```python\n" .. KERNEL .. "\n# " .. ("x"):rep(8000) .. "\n```"
    local run, sent = fake_run({ big, big })
    run.opts = { max_code_bytes = 4096 }
    local a = ask.code(run, { tag = "optimize", template = "optimize", vars = {} })
    expect.eq(a.code, nil)
    expect.eq(a.llm_code, "ETOOBIG")
    expect.match(a.error, "^ETOOBIG: the reply's kernel is %d+ bytes, over %-%-max%-code%-bytes %(4096%)")
    expect.eq(counts(run, "optimize"), "used 0 repaired 0 reasked 0 lost 1 continued 0 shortened 0")
    expect.eq(#sent, 2, "asked once more")
    expect.eq(sent[2].follow[1].content, "(a reply over the size limit: not repeated here)")
    expect.truthy(#a.reply < 1000 and not a.reply:find("xxxx", 1, true), "the reply file has a note, not the reply: " .. #a.reply)
    expect.match(a.reply, "over %-%-max%-code%-bytes")
  end)

  it("re-asks after a reply the LLM layer refused for its size (ETOOBIG), not echoing it", function()
    local run, sent = fake_run({ { err = "ETOOBIG: the reply's text is more than 1048576 bytes, over max_reply", code = "ETOOBIG" },
      "```python\n" .. KERNEL .. "\n```" })
    local a = ask.code(run, { tag = "optimize", template = "optimize", vars = {} })
    expect.eq(a.code, KERNEL)
    expect.eq(sent[2].follow[1].content, "(a reply over the size limit: not repeated here)")
    expect.match(sent[2].follow[2].content, "^Your reply could not be used: ETOOBIG")
    expect.eq(counts(run, "optimize"), "used 0 repaired 0 reasked 1 lost 0 continued 0 shortened 0")
  end)

  it("loses a reply over --max-reply-bytes even when the LLM layer let it through", function()
    local run = fake_run({ ("y"):rep(5000), ("y"):rep(5000) })
    run.opts = { max_reply_bytes = 4096 }
    local a = ask.json(run, { tag = "route", template = "route", vars = { graph = "g" }, want = { fields = { "route" } } })
    expect.eq(a.value, nil)
    expect.eq(a.llm_code, "ETOOBIG")
    expect.match(a.error, "the reply is 5000 bytes, over %-%-max%-reply%-bytes %(4096%)")
    expect.falsy(a.reply:find("yyyy", 1, true), "not kept")
  end)

  it("counts directions from the model and from rules, and warns past the share", function()
    local s = reply_stats.new()
    s:directions("diagnose", 1, 3)
    local sum = s:summary()
    expect.eq(sum.totals.rules_share, 0.75)
    expect.match(reply_stats.warning(sum, 0.5), "3 of 4 directions %(75%%%) came from the skills' rules")
    expect.eq(reply_stats.warning(sum, 0.8), nil)
    local again = reply_stats.new(json.decode(json.encode(sum)))
    expect.eq(again:summary().by_role.diagnose.directions_rules, 3, "carried across --resume")
  end)
end)
