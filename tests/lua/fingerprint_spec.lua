-- One hash scheme: kagent.sha256 is SHA-256 (published test vectors), the agents' fingerprints
-- are built on it, and rows that an older kagent-rt wrote with its earlier hash are found again
-- once a run of their problem opens the database.
local mem = kagent.mem
local fingerprint = require("agents.lib.fingerprint")
local legacy = require("agents.lib.fingerprint_legacy")
local memory = require("agents.run.memory")

describe("fingerprints", function()
  it("kagent.sha256 gives the FIPS 180-2 digests", function()
    expect.eq(kagent.sha256(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    expect.eq(kagent.sha256("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    expect.eq(kagent.sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    expect.eq(kagent.sha256(("a"):rep(1000000)),
      "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    expect.errors(function() kagent.sha256(1) end, "must be a string")
  end)

  it("problems and kernels are hashed with it; formatting does not change a kernel's", function()
    expect.eq(fingerprint.hash("hello"), "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824")
    local a = "def f(x):\n    return x + 1  # add one\n"
    local b = "# a comment\ndef f(x):\n\n    return x + 1   \n"
    expect.eq(fingerprint.of(a), fingerprint.of(b))
    expect.eq(fingerprint.of(a), "src:" .. kagent.sha256("def f(x):\n    return x + 1"))
    expect.ne(fingerprint.of(a), fingerprint.of("def f(x):\n    return x + 2\n"))
  end)

  it("the earlier hash is reproduced as written (it was not FNV-1a)", function()
    expect.eq(legacy.hash("hello"):sub(1, 8), "0a3a3856")
    expect.ne(legacy.hash("hello"):sub(1, 8), "4f9f2cab", "FNV-1a's value")
  end)

  it("rows of an older database are migrated when their problem is opened", function()
    local db = assert(mem.open(":memory:"))
    local code = "class Model:\n    pass\n"
    local old, other = legacy.hash(code), legacy.hash("class Other:\n    pass\n")
    local run_id = assert(db:start_run({ problem = "p.py", problem_hash = old, gpu = "H100", policy = "beam" }))
    assert(db:add_lesson({ text = "tile 64 wins", problem_hash = old, gpu = "H100" }))
    assert(db:archive_kernel({ problem_hash = old, gpu = "H100", dtype = "fp32", source = "# k", time_ms = 1.5,
      run_id = run_id }))
    assert(db:add_lesson({ text = "another problem", problem_hash = other, gpu = "H100" }))

    expect.eq(memory.adopt_legacy_hashes(db, code), 3)
    local m = assert(memory.open(db, { problem = "p.py", problem_hash = fingerprint.hash(code), gpu = "H100",
      policy = "beam" }))
    local best = m:best_archived("fp32")
    expect.eq(best and best.source, "# k", "the archived kernel is found under the new hash")
    local lessons = db:lessons({ problem_hash = fingerprint.hash(code) })
    expect.eq(#lessons, 1)
    expect.eq(lessons[1].text, "tile 64 wins")
    expect.eq(#db:runs({ problem_hash = fingerprint.hash(code) }), 2, "the old run and the new one")
    expect.eq(#db:lessons({ problem_hash = other }), 1, "another problem's rows are left alone")
    expect.eq(memory.adopt_legacy_hashes(db, code), 0, "a second open rewrites nothing")
    db:close()
  end)
end)
