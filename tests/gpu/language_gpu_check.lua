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
-- block(name[, fault]) -> a reply carrying fixture `name`, with a planted fault ({old, new}) if given
local function block(name, fault)
  local text = assert(fs.read(fx .. name))
  return "```python\n" .. (fault and fake.planted(text, fault[1], fault[2]) or text) .. "```\n"
end

-- agent(script, entry, step, argv, problem) -> run folder, summary: agents/<entry> on `problem`
-- (default #36) fp32 with the FAKE LLM server answering from `script`, its own output folder and
-- memory under `out`
local function agent(script, entry, step, argv, problem)
  local a = { "--problem", problem or "examples/problems/36_rmsnorm.py", "--dtype", "fp32", "--language", "cuda" }
  for _, x in ipairs(argv) do a[#a + 1] = x end
  local r, rd, s = fake.scripted_run(script, entry, a, out .. "/" .. step, 1800)
  io.write(r.stderr:sub(-4000))
  check(r.code == 0, entry .. " exit code " .. tostring(r.code))
  check(s ~= nil, step .. ": summary.json written")
  return rd, s
end

if want("beam") then
  local rd, s = agent({ latency = 0, replies = {
    { match = "# REFINE KERNEL", text = block("rmsnorm_cuda.py") },
    { match = "# GENERATE KERNEL", text = "GRANULARITY: full rewrite\n" .. block("rmsnorm_cuda.py", { "* inv;", "* inv_rms;" }) },
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

-- The skill step: agents/skill.lua on the GEMM showcase from an own tiled CUDA GEMM (no library
-- call). The FAKE planner picks the TF32/cuBLAS skill (skills/tf32_gemm.lua); the FAKE optimizer
-- answers with the cuBLAS GEMM plus its own epilogue kernel (examples/kernels/cuda/), which
-- skill.lua's default policy, some, must accept with its library share recorded.
local TF32_PLAN = { plans = { { skill = "tf32_gemm",
  evidence = { { metric = "sm_pct", value = 0, why = "an FFMA GEMM with the tensor pipe idle" },
    { metric = "time_ms", value = 0, why = "the measured time of the plain tiled GEMM" } },
  plan = "PLAN_TF32: the GEMM through cuBLAS (TF32 where allowed), bias, GELU and scale in one own kernel",
  change = "replace the FFMA tiled GEMM by a cuBLAS GEMM plus an own epilogue kernel",
  params = { gemm = "cublas", epilogue = "own" } } } }

-- cublas_like(name) -> true for a kernel name cuBLAS/cuBLASLt launch (sgemm, xmma, cutlass, ...)
local function cublas_like(name)
  local n = tostring(type(name) == "table" and name.name or name):lower()
  return n:find("gemm", 1, true) or n:find("cublas", 1, true) or n:find("cutlass", 1, true)
    or n:find("xmma", 1, true) or n:find("sm90_", 1, true) or n:find("sm80_", 1, true)
end

if want("skill") then
  local cublas = root .. "/examples/kernels/cuda/l2_gemm_bias_gelu_scale_cublas.py"
  local rd, s = agent({ latency = 0, replies = {
    { match = "# PLAN", text = fake.fenced(TF32_PLAN) },
    { match = "# REFLEXION", text = fake.fenced({ was_diagnosis_correct = true, was_fix_effective = true,
      expected_outcome = "faster", actual_outcome = "measured", reasoning = "scripted (fake LLM)",
      lessons = { "cuBLAS carries the GEMM; an own epilogue kernel keeps the policy some" },
      avoid_patterns = {}, try_patterns = {} }) },
    -- the optimizer and any repair get the cuBLAS kernel, whichever skill the plan carries
    { match = "# OPTIMIZE KERNEL", text = "cuBLAS GEMM, own epilogue.\n```python\n" .. assert(fs.read(cublas)) .. "```\n" },
    { match = "# AUDIT FAILURE", text = fake.fenced({ cause = "scripted audit (fake LLM)", evidence = "the failure above",
      fix = "the cuBLAS GEMM plus the own epilogue kernel" }) },
    { match = "# REPAIR KERNEL", text = "```python\n" .. assert(fs.read(cublas)) .. "```\n" },
  } }, "skill.lua", "skill", { "--kernel", fx .. "gemm_bias_gelu_scale_cuda.py", "--rounds", "1", "--directions", "1" },
    "examples/problems/l2_gemm_bias_gelu_scale.py")
  if s then
    check(s.library == "some", "skill.lua judges under its default policy, some (" .. tostring(s.library) .. ")")
    check(s.language == "cuda", "language cuda (" .. tostring(s.language) .. ")")
    -- the retrieval decides whether tf32_gemm may be planned: it is allowed only for a profiled
    -- fp32 GEMM whose tensor pipe is idle or whose SMs are busy (agents/lib/buckets.lua); an
    -- unprofiled kernel (no counters) or a bandwidth-bound one does not allow it, and the planner's
    -- choice is then rejected and the gap filled by rule (agents/roles/planner.lua)
    local dirs = json.decode(fs.read(rd .. "/rounds/round_1/directions_input.json") or "null") or {}
    local d = dirs.info and dirs.info.retrieval or {}
    local allowed = type(d.allowed) == "table" and d.allowed or {}
    local tf32_allowed = false
    for _, n in ipairs(allowed) do if n == "tf32_gemm" then tf32_allowed = true end end
    print(string.format("INFO retrieval: bucket %s, tier %s, structure %s; allowed skills: %s", tostring(d.bucket),
      tostring(d.tier), tostring(d.structure), #allowed > 0 and table.concat(allowed, ", ") or "(none)"))
    local strat = (json.decode(fs.read(rd .. "/rounds/round_1/w1/strategy.json") or "null") or {})[1] or {}
    if tf32_allowed then
      check(strat.skill == "tf32_gemm" and strat.source == "planner",
        "the round's plan used skill tf32_gemm, the planner's (" .. tostring(strat.skill) .. ", " .. tostring(strat.source) .. ")")
    else
      print("INFO tf32_gemm not allowed by this profile's retrieval: the planner's choice was rejected ("
        .. json.encode(dirs.info and dirs.info.rejected or {}) .. "); the round used " .. tostring(strat.skill))
      check(type(strat.skill) == "string", "the round's plan names a skill (" .. tostring(strat.skill) .. ")")
    end
    check(s.status == "done" and s.verified == true, "the best kernel is verified and confirmed (" .. tostring(s.status) .. ")")
    check(s.best and s.best.id == "r1w1", "the best is the round's kernel, not the input (" .. tostring(s.best and s.best.id) .. ")")
    local best_code = fs.read(rd .. "/best_kernel.py") or ""
    check(best_code:find("torch.matmul(x, self.gemm.weight.t())", 1, true) ~= nil
      and best_code:find("bias_gelu_scale_ext", 1, true) ~= nil, "best_kernel.py is the cuBLAS GEMM plus its own epilogue")
    check(type(s.own_share) == "number" and s.own_share < 0.5,
      "its own kernels carry under half of its GPU time (own_share " .. tostring(s.own_share) .. ")")
    local libs, named = type(s.library_kernels) == "table" and s.library_kernels or {}, false
    for _, k in ipairs(libs) do if cublas_like(k) then named = true end end
    check(named, "a cuBLAS kernel by name in library_kernels (" .. json.encode(libs) .. ")")
    local final = json.decode(fs.read(rd .. "/best_eval.json") or "null") or {}
    check(type(final.own_share) == "number" and final.own_share == s.own_share, "best_eval.json carries the same own_share (" .. tostring(final.own_share) .. ")")
    print(string.format("FIGURE skill --language cuda l2_gemm_bias_gelu_scale fp32, library some: input (own tiled GEMM) "
      .. "%.4f ms, best (cuBLAS + own epilogue, skill %s) %.4f ms (%.2fx); own share %s; library kernels %s",
      s.input_ms or 0, tostring(strat.skill), s.best_ms or 0, s.speedup_vs_input or 0, tostring(s.own_share), json.encode(libs)))
    print("REPORT " .. rd .. "/report.html")
  end
end

print(failures == 0 and "ALL PASS" or (failures .. " FAILURE(S)"))
return failures == 0 and 0 or 1
