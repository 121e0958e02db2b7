-- Driver of tests/gpu/language_gpu_check.sh (GPU only). Prints PASS/FAIL lines and figures;
-- returns 1 on any failure.
package.path = kagent.root .. "/?.lua;" .. kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, json = kagent.fs, kagent.json
local fake = require("fake_session")
local out = kagent.args[1] or "/tmp/kagent-language-gpu-check"
local root = kagent.root
local failures = 0
local steps = os.getenv("KAGENT_LANGUAGE_CHECK_STEPS") or "beam,skill"
local function want(step) return ("," .. steps .. ","):find("," .. step .. ",", 1, true) ~= nil end
local function check(cond, what)
  print((cond and "PASS " or "FAIL ") .. what)
  if not cond then failures = failures + 1 end
end

local fx = root .. "/tests/fixtures/agent/cuda/"
local function block(name) return "```python\n" .. assert(fs.read(fx .. name)) .. "```\n" end

-- agent(script, entry, step, argv) -> run folder, summary: agents/<entry> on #36 fp32 with the
-- FAKE LLM server answering from `script`, its own output folder and memory under `out`
local function agent(script, entry, step, argv)
  local server, port = fake.start(script, out)
  local a = { "--problem", "examples/problems/36_rmsnorm.py", "--dtype", "fp32", "--language", "cuda",
    "--out", out .. "/" .. step }
  for _, x in ipairs(argv) do a[#a + 1] = x end
  local r = fake.run_agent(entry, a, fake.env(port, { KAGENT_DB = out .. "/" .. step .. ".db" }), 1800)
  server:kill()
  io.write(r.stderr:sub(-4000))
  check(r.code == 0, entry .. " exit code " .. tostring(r.code))
  local rd = fake.newest_run(out .. "/" .. step)
  local s = rd and json.decode(fs.read(rd .. "/summary.json") or "null")
  check(type(s) == "table", step .. ": summary.json written")
  return rd, type(s) == "table" and s or nil
end

if want("beam") then
  local rd, s = agent({ latency = 0, replies = {
    { match = "# REFINE KERNEL", text = block("rmsnorm_cuda.py") },
    { match = "# GENERATE KERNEL", text = "GRANULARITY: full rewrite\n" .. block("rmsnorm_cuda_broken.py") },
  } }, "beam.lua", "beam", { "--rounds", "0", "--gen-workers", "1", "--refine", "2" })
  if s then
    local w1 = rd .. "/generate/w1/"
    local gp = fs.read(w1 .. "gen_prompt.txt") or ""
    check(gp:find("cuda_sources", 1, true) ~= nil, "the seed's prompt asks for load_inline CUDA")
    local rp = fs.read(w1 .. "refine_1_prompt.txt") or ""
    check(rp:find("inv_rms", 1, true) ~= nil and rp:find("error", 1, true) ~= nil, "the repair prompt carries nvcc's error")
    check(not rp:find("ninja: build stopped", 1, true), "and no ninja log")
    check(s.verified == true, "the repaired CUDA kernel is confirmed")
    check(s.language == "cuda" and s.library == "own", "language cuda, policy own")
    check(s.granularity == "full_rewrite", "the seed's granularity recorded")
    check(s.sanitizer == true, "compute-sanitizer passed on the confirmed kernel (" .. tostring(s.sanitizer) .. ")")
    check(type(s.own_share) == "number", "the own share of its GPU time recorded (" .. tostring(s.own_share) .. ")")
    local final = json.decode(fs.read(rd .. "/best_eval.json") or "null") or {}
    check(type(final.compile) == "table", "the compile step in its result")
    local input = json.decode(fs.read(rd .. "/input_eval.json") or "null") or {}
    check(type(input.compile) == "table" and input.compile.cached == true, "the input's build came from the cache")
    print(string.format("FIGURE beam --language cuda #36 fp32: best %.4f ms; eager %.4f ms, torch.compile %.4f ms; own share %s",
      s.best_ms or 0, s.baselines and s.baselines.eager_ms or 0, s.baselines and s.baselines.compile_ms or 0,
      tostring(s.own_share)))
    print("REPORT " .. rd .. "/report.html")
  end
end

if want("skill") then
  local _, s = agent({ latency = 0, replies = {} }, "skill.lua", "skill",
    { "--kernel", fx .. "rmsnorm_cuda.py", "--rounds", "0" })
  if s then
    check(s.library == "some", "skill.lua judges under its default policy, some (" .. tostring(s.library) .. ")")
    check(s.verified == true, "the CUDA kernel is confirmed under it")
  end
end

print(failures == 0 and "ALL PASS" or (failures .. " FAILURE(S)"))
return failures == 0 and 0 or 1
