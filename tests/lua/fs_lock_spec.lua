-- kagent.fs.lock (issue #53, item 4): an exclusive flock on a file that holds the holder's pid;
-- a second taker (another handle, another process) is EBUSY naming that pid; the lock goes with
-- unlock(), and with the process however it ends (kill -9); children do not inherit it.
local fs, proc = kagent.fs, kagent.proc
local fake = dofile(kagent.root .. "/tests/fixtures/fake_llm/fake.lua")

-- this process's pid: /proc/self is the reader
local function my_pid() return tonumber(assert(fs.read("/proc/self/stat")):match("^(%d+)")) end

describe("kagent.fs.lock", function()
  it("holds the file with this process's pid; a second taker is EBUSY with it; unlock frees it", function()
    local path = spec.tmpdir("lock") .. "/run.lock"
    local h = assert(fs.lock(path))
    expect.eq(fs.read(path), my_pid() .. "\n")
    local none, err, code, pid = fs.lock(path)
    expect.eq(none, nil)
    expect.eq(code, "EBUSY")
    expect.eq(pid, my_pid())
    expect.eq(err, "EBUSY: " .. path .. " is locked by process " .. my_pid())
    expect.eq(fs.read(path), my_pid() .. "\n", "a refused taker leaves the holder's pid")
    expect.eq(h:locked(), true)
    expect.eq(h:unlock(), true)
    expect.eq(h:locked(), false)
    local again = assert(fs.lock(path))
    again:unlock()
  end)

  it("is EIO with the path when the file cannot be made", function()
    local none, err, code = fs.lock("/nonexistent-folder-kagent/run.lock")
    expect.eq(none, nil)
    expect.eq(code, "EIO")
    expect.match(err, "/nonexistent%-folder%-kagent/run%.lock")
  end)

  it("is not inherited by a child: unlocked, the file is free though the child lives", function()
    local path = spec.tmpdir("lock-child") .. "/run.lock"
    local h = assert(fs.lock(path))
    local child = assert(proc.spawn({ "sleep", "60" }))
    h:unlock()
    local again, err = fs.lock(path)
    child:kill("KILL")
    child:wait(10)
    expect.truthy(again, "a child kept the lock alive: " .. tostring(err))
    again:unlock()
  end)

  it("is another process's until that process is killed with SIGKILL", function()
    local dir = spec.tmpdir("lock-proc")
    local path = dir .. "/run.lock"
    fs.write(dir .. "/hold.lua", string.format(
      "local h = assert(kagent.fs.lock(%q))\nprint('locked')\nio.stdout:flush()\nkagent.task.sleep(120)\n", path))
    local p = assert(proc.spawn({ fake.self_exe(), "--env-file", "/dev/null", dir .. "/hold.lua" }))
    expect.eq(p:read_line(60), "locked")
    local none, err, code, pid = fs.lock(path)
    expect.eq(none, nil, "the other process holds it")
    expect.eq(code, "EBUSY")
    expect.eq(pid, p.pid, err)
    p:kill("KILL")
    p:wait(30)
    local h = assert(fs.lock(path), "kill -9 released the lock")
    expect.eq(fs.read(path), my_pid() .. "\n")
    h:unlock()
  end)
end)
