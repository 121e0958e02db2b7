-- The layers and forwards KernelBench Level 3 brings (recurrent layers with their states,
-- MultiheadAttention with (q, k, v), torch.nn's Transformer layers, control flow on shapes, a
-- parameter's `.T`), on small fixtures (tests/fixtures/fuse/problems/): agents/split.lua
-- decomposes each validly, and agents/fuse.lua with no LLM verifies a first program of the
-- subgraphs' reference ops against the model, so each subgraph problem computes what its part
-- of the model computes. Needs torch (KAGENT_PYTHON); no timing is asserted.
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, json = kagent.fs, kagent.json
local fake = require("fake_session")
local cpu = fake.cpu()
local dir_of = kagent.root .. "/tests/fixtures/fuse/problems/"
local FIXTURES = { "lstm_state", "gru_hidden", "attention_qkv", "transformer_layer", "shape_control_flow",
  "weight_transpose" }

local function read_json(path) return json.decode(assert(fs.read(path), "cannot read " .. path)) end

describe("Level 3 layers", function()
  it("split.lua decomposes each fixture and its plan passes the decomposition check", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("split-layers")
    local paths = {}
    for i, n in ipairs(FIXTURES) do paths[i] = dir_of .. n .. ".py" end
    local r = fake.run_agent("split.lua", { "--problems", table.concat(paths, ","), "--devices", "cpu",
      "--out", dir .. "/split" }, cpu.env(dir), 600)
    expect.eq(r.code, 0, r.stderr:sub(-3000))
    local rows = read_json(dir .. "/split/split.json").rows
    expect.eq(#rows, #FIXTURES)
    local by = {}
    for _, row in ipairs(rows) do by[row.problem] = row end
    for _, n in ipairs(FIXTURES) do
      local row = by[n .. ".py"]
      expect.truthy(row and row.valid, n .. ": " .. tostring(row and row.reason))
    end
    expect.eq(by["lstm_state.py"].subgraphs, 2, "the LSTM with the views of its tuple, then the Linear")
    expect.eq(by["transformer_layer.py"].subgraphs, 7)
    expect.eq(by["weight_transpose.py"].subgraphs, 1, "`self.weight.T` is a view: it stays with the matmul")
  end, { timeout = 600 })

  it("fuse.lua with no LLM verifies a first program for each against the model", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("fuse-layers")
    for _, n in ipairs(FIXTURES) do
      local out = dir .. "/" .. n
      local r = fake.run_agent("fuse.lua", { "--problem", dir_of .. n .. ".py", "--no-llm", "--devices", "cpu",
        "--out", out }, cpu.env(dir), 600)
      expect.eq(r.code, 0, n .. ": " .. r.stderr:sub(-3000))
      local s = read_json(fake.newest_run(out) .. "/summary.json")
      expect.eq(s.decomposition.by, "splitter", n)
      expect.eq(s.verified, true, n)
      expect.eq(s.first_program.verified, true, n)
      for _, k in ipairs(s.first_program.kernels) do expect.eq(k.verified, true, n .. " " .. tostring(k.label)) end
      expect.eq(#s.first_program.hot_path.foreign, 0, n .. ": the composed forward calls only the subgraph kernels")
    end
  end, { timeout = 600 })
end)
