-- kagent.proc: pipes, lines, timeouts, process groups.
local proc, task, time = kagent.proc, kagent.task, kagent.time

describe("proc", function()
  it("runs 50 children at once", function()
    local t0 = time.now()
    local fns = {}
    for i = 1, 50 do fns[i] = function() return proc.run({ "sleep", "0.5" }) end end
    local r = task.all(fns)
    local dt = time.now() - t0
    for i = 1, 50 do expect.eq(r[i][1].code, 0) end
    expect.lt(dt, 1.5, "wall time of 50 concurrent sleep 0.5")
  end)

  it("captures stdout, stderr, exit code and signal", function()
    local r = proc.run({ "sh", "-c", "echo out; echo err >&2; exit 3" })
    expect.eq(r.code, 3); expect.eq(r.stdout, "out\n"); expect.eq(r.stderr, "err\n")
    local k = proc.run({ "sh", "-c", "kill -9 $$" })
    expect.eq(k.signal, 9)
  end)

  it("writes stdin and reads lines", function()
    local p = proc.spawn({ "cat" }, { stdin = true })
    expect.truthy(p:write("one\ntwo\n"))
    expect.eq(p:read_line(2), "one")
    expect.eq(p:read_line(2), "two")
    local line, err = p:read_line(0.05)
    expect.eq(line, nil); expect.match(err, "ETIMEDOUT")
    p:close_stdin()
    local l2, e2 = p:read_line(2)
    expect.eq(l2, nil); expect.match(e2, "EOF")
    expect.eq(p:wait(2).code, 0)
  end)

  it("passes stdin text, cwd and env", function()
    local r = proc.run({ "sh", "-c", "cat; pwd; echo $KAGENT_SPEC_VAR" },
      { stdin = "in\n", cwd = "/tmp", env = { KAGENT_SPEC_VAR = "v1" } })
    expect.eq(r.stdout, "in\n/tmp\nv1\n")
  end)

  it("kills a child that ignores TERM after the grace period", function()
    local t0 = time.now()
    local r = proc.run({ "sh", "-c", "trap '' TERM; sleep 30" }, { timeout = 0.2, kill_grace = 0.3 })
    local dt = time.now() - t0
    expect.eq(r.timed_out, true); expect.eq(r.code, 124); expect.eq(r.signal, 9)
    expect.lt(dt, 2.0)
    expect.lt(0.45, dt, "KILL came only after the grace period")
  end)

  it("kills the whole process group", function()
    local dir = spec.tmpdir("pg")
    -- A grandchild that would leave a file behind if the kill missed it.
    local p = proc.spawn({ "sh", "-c", "(sleep 0.6; touch " .. dir .. "/leaked) & sleep 30" })
    task.sleep(0.1)
    p:kill()
    local r = p:wait(5)
    expect.eq(r.signal, 15)
    task.sleep(1.0)
    expect.falsy(kagent.fs.exists(dir .. "/leaked"), "grandchild survived the group kill")
  end)

  it("caps captured output", function()
    local r = proc.run({ "sh", "-c", "head -c 100000 /dev/zero" }, { max_output = 1000 })
    expect.eq(#r.stdout, 1000); expect.eq(r.stdout_dropped, 99000)
  end)

  it("hands over stderr as it comes, with what was dropped", function()
    local p = assert(proc.spawn({ "sh", "-c", "echo one >&2; read x; head -c 3000 /dev/zero >&2; echo two >&2" },
      { stdin = true, max_output = 1000 }))
    local text, dropped = "", 0
    while not text:find("one") do
      local more, d = p:take_stderr()
      text, dropped = text .. more, dropped + d
      kagent.task.sleep(0.01)
    end
    expect.eq(text, "one\n")
    expect.eq(dropped, 0)
    p:write("go\n")
    local r = p:wait(10)
    expect.eq(r.stderr, string.rep("\0", 1000), "what was taken is not returned again")
    expect.eq(r.stderr_dropped, 3004 - 1000)
  end)

  it("gives children still running at shutdown a TERM before the KILL", function()
    local dir = spec.tmpdir("shutdown")
    kagent.fs.write(dir .. "/t.lua", string.format([[
      kagent.proc.spawn({ "sh", "-c", "trap 'touch %s/cleaned; exit 0' TERM; echo up; sleep 30 & wait" })
      kagent.proc.spawn({ "sh", "-c", "trap '' TERM; sleep 30" })  -- ignores TERM: killed after the grace
      kagent.task.sleep(0.3)
    ]], dir))
    local t0 = kagent.time.now()
    local r = assert(proc.run({ spec.build_dir .. "/kagent-rt", dir .. "/t.lua" }, { timeout = 20 }))
    expect.eq(r.code, 0, r.stderr)
    expect.truthy(kagent.fs.exists(dir .. "/cleaned"), "the child ran its TERM handler")
    expect.lt(kagent.time.now() - t0, 5, "the one ignoring TERM did not hold the exit up")
    proc.run({ "rm", "-rf", dir })
  end)

  it("lists the runtime's environment", function()
    local env = proc.environ()
    expect.eq(env.PATH, os.getenv("PATH"))
    local r = proc.run({ "sh", "-c", "echo $PATH" }, { clear_env = true, env = { PATH = env.PATH } })
    expect.eq(r.stdout, env.PATH .. "\n")
  end)

  it("reports programs that cannot start", function()
    local p, err, code = proc.spawn({ "/nonexistent/program" })
    expect.eq(p, nil); expect.eq(code, "ESPAWN"); expect.match(err, "nonexistent")
  end)

  it("killing a waiting task kills its child", function()
    local pid
    local t = task.spawn(function()
      local p = proc.spawn({ "sleep", "30" })
      pid = p.pid
      return p:wait()
    end)
    task.sleep(0.05)
    task.kill(t)
    task.sleep(0.3)
    local r = proc.run({ "sh", "-c", "kill -0 " .. pid .. " 2>/dev/null && echo alive || echo gone" })
    expect.eq(r.stdout, "gone\n")
  end)
end)
