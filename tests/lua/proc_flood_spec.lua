-- A child that floods what the runtime reads from it (issue #28, item 1 for every pipe): stdout
-- read by lines is split in one pass and held to max_line per line and max_output per stream, so
-- a line without a newline neither stalls the reader nor grows its buffer; the runtime's own
-- readers of a command's output (sweep's Slurm commands) stay linear; and kagent-rt stopped with
-- SIGTERM during a flood ends at once; a worker reply over gpu.MAX_REPLY fails its job at once.
local proc, task, ktime, fs, gpu = kagent.proc, kagent.task, kagent.time, kagent.fs, kagent.gpu

describe("a child that floods its output", function()
  it("hands over a line longer than max_line as its head, then the next line", function()
    local p = assert(proc.spawn({ "sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' a; echo; echo next" },
      { max_line = 65536 }))
    local line, cut = p:read_line(20)
    expect.eq(#line, 65536)
    expect.eq(line, string.rep("a", 65536))
    expect.eq(cut, true)
    local nxt, ncut = p:read_line(20)
    expect.eq(nxt, "next")
    expect.eq(ncut, false)
    local r = p:wait(20)
    expect.eq(r.stdout_dropped, 3000000 - 65536)
    expect.eq(r.stdout, "")
  end)

  it("gives a reader of output without any newline one head, and neither stalls nor grows", function()
    local p = assert(proc.spawn({ "cat", "/dev/zero" }, { max_line = 1048576, max_output = 4 * 1048576 }))
    local stop, max_gap = false, 0
    local ticker = task.spawn(function()
      local last = ktime.now()
      while not stop do
        task.sleep(0.02)
        local now = ktime.now()
        max_gap, last = math.max(max_gap, now - last), now
      end
    end)
    local line, cut = p:read_line(5)
    expect.eq(#(line or ""), 1048576, "the head within 5 s: " .. tostring(cut))
    expect.eq(cut, true)
    -- the rest of that line never ends: no more lines, while the reader waits on
    local more, err = p:read_line(1.5)
    expect.eq(more, nil)
    expect.match(err, "^ETIMEDOUT")
    stop = true
    task.wait(ticker)
    p:kill("KILL")
    local r = p:wait(5)
    expect.eq(r.stdout, "", "nothing of the flood is kept")
    expect.truthy(r.stdout_dropped > 4 * 1048576, r.stdout_dropped .. " bytes dropped")
    expect.truthy(max_gap < 0.5, string.format("the loop stalled %.2f s", max_gap))
  end)

  it("ends kagent-rt promptly on SIGTERM while commands flood it", function()
    local dir = spec.tmpdir("proc_flood")
    -- a Slurm command that fails after 4 MB of spaces on stderr: before, sweep's message trim
    -- ("%s+$") took the loop for hours on it
    fs.write(dir .. "/squeue", "#!/bin/sh\nhead -c 4000000 /dev/zero | tr '\\0' ' ' >&2\necho x >&2\nexit 1\n")
    proc.run({ "chmod", "+x", dir .. "/squeue" })
    fs.write(dir .. "/t.lua", string.format([[
      local slurm = require("agents.tools.sweep.slurm")
      -- and a child whose stdout, read by lines, never has a newline
      local p = kagent.proc.spawn({ "cat", "/dev/zero" })
      kagent.task.spawn(function() while p:read_line(60) do end end)
      local n = 0
      while true do
        local active, err = slurm.queue({ dir = %q, name = "flood" }, {})
        n = n + 1
        if n == 2 then kagent.fs.write(%q, "flooding") end
        assert(not active and err:find("x$"), tostring(err):sub(-200))
      end
    ]], dir, dir .. "/started"))
    local p = assert(proc.spawn({ spec.build_dir .. "/kagent-rt", dir .. "/t.lua" },
      { env = { PATH = dir .. ":" .. os.getenv("PATH") }, timeout = 120 }))
    local t0 = ktime.now()
    while not fs.exists(dir .. "/started") and ktime.now() - t0 < 20 do task.sleep(0.1) end
    task.sleep(0.5)
    local t1 = ktime.now()
    local started = fs.exists(dir .. "/started")
    proc.run({ "kill", "-TERM", tostring(p.pid) })
    local r = p:wait(15)
    local stop_s = ktime.now() - t1
    if r.timed_out or r.code == 124 then p:kill("KILL") end
    proc.run({ "rm", "-rf", dir })
    expect.truthy(started, "two flooded Slurm calls within 20 s: " .. tostring(r.stderr):sub(-300))
    expect.truthy(stop_s < 5, string.format("kagent-rt took %.1f s to stop", stop_s))
    expect.match(r.stderr, "signal 15")
    print(string.format("     SIGTERM during a flood: kagent-rt stopped in %.2f s", stop_s))
  end, { timeout = 120 })

  it("fails a job at once when the worker's reply is longer than MAX_REPLY", function()
    -- a FAKE kagent_eval package: the ready line, then a reply of MAX_REPLY + 1 MiB to any job
    local dir = spec.tmpdir("fake-eval-big")
    fs.mkdir_p(dir .. "/kagent_eval")
    fs.write(dir .. "/kagent_eval/__init__.py", "")
    fs.write(dir .. "/kagent_eval/worker.py", table.concat({
      "import json, os, sys",
      "print(json.dumps({'ready': True, 'device': 'cpu', 'mode': 'cpu', 'torch': None, 'triton': None,",
      "    'version': " .. string.format("%q", kagent.version) .. ",",
      "    'package': os.path.dirname(os.path.abspath(__file__))}), flush=True)",
      "for line in sys.stdin:",
      "    job = json.loads(line)",
      "    big = 'x' * (" .. gpu.MAX_REPLY .. " + (1 << 20))",
      "    print(json.dumps({'id': job['id'], 'ok': False, 'error': big}), flush=True)",
    }, "\n") .. "\n")
    local pool = gpu.pool({ devices = "cpu", python = "python3", env = { PYTHONPATH = dir },
      start_timeout = 30, timeout = 60 })
    assert(pool:devices())
    local t0 = ktime.now()
    local res = pool:verify({ problem = spec.root .. "/tests/fixtures/eval/relu_problem.py", candidate = "x = 1" })
    local took = ktime.now() - t0
    pool:close()
    proc.run({ "rm", "-rf", dir })
    expect.eq(res.ok, false)
    expect.match(res.error, "^EWORKER: .*a reply longer than " .. gpu.MAX_REPLY .. " bytes")
    expect.truthy(took < 20, string.format("the job took %.1f s", took))
  end, { timeout = 120 })
end)
