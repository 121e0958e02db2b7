-- Benchmark of kagent.llm.chat against the fake provider (tests/fixtures/fake_llm, a fake server
-- on loopback; its Python threads, not kagent-rt, are the usual limit at high call rates).
--   kagent-rt bench/llm_bench.lua [calls=200] [latency=1.0] [burst_calls=2000] [streams=64]
-- Prints: wall time of `calls` concurrent chats (one task each) at `latency` s per reply, calls/s,
-- and the runtime's own cost per call (CPU seconds of kagent-rt / calls, and wall − latency);
-- then `streams` concurrent chats of the same replies whole and streamed (server-sent events,
-- one delta per 4 characters, 10 ms apart), side by side: kagent-rt CPU per call and per delta.
local fake = dofile(kagent.root .. "/tests/fixtures/fake_llm/fake.lua")
local llm, task = kagent.llm, kagent.task

local calls = tonumber(kagent.args[1]) or 200
local latency = tonumber(kagent.args[2]) or 1.0
local burst_calls = tonumber(kagent.args[3]) or 2000
local streams = tonumber(kagent.args[4]) or 64

local srv = fake.start{ script = { require_auth = false, default_text = "ok" } }
-- An OpenAI-compatible server at a local URL needs no key, so the bench needs no secret.
llm.configure{ model = "openai:fake-model", base_url = srv.url .. "/v1", concurrency = math.max(calls, 64),
               prices = { ["fake-model"] = { input = 0, output = 0 } } }

local function run(n, label, stream)
  local fns = {}
  for i = 1, n do
    fns[i] = function()
      return assert(llm.chat{ messages = { { role = "user", content = label .. " call " .. i } }, max_tokens = 64,
                              stream = stream })
    end
  end
  local cpu0, t0 = os.clock(), kagent.time.now()
  local rs = task.all(fns)
  local wall, cpu = kagent.time.now() - t0, os.clock() - cpu0
  for _, r in ipairs(rs) do assert(r.ok, r[1]) end
  return wall, cpu
end

srv:set_script{ require_auth = false, latency = latency }
local wall, cpu = run(calls, "concurrent")
local st = srv:stats()
print(string.format("concurrent: %d calls, %d tasks, %.2f s latency per reply", calls, calls, latency))
print(string.format("  wall %.3f s  (%.1f calls/s)  server saw max %d at once", wall, calls / wall, st.max_concurrency))
print(string.format("  overhead: wall - latency = %.3f s for the batch; kagent-rt CPU %.3f ms per call",
  wall - latency, cpu / calls * 1000))

srv:set_script{ require_auth = false, latency = 0 }
llm.configure{ concurrency = 64 }
local bwall, bcpu = run(burst_calls, "burst")
print(string.format("throughput: %d calls, 0 s latency, 64 in flight", burst_calls))
print(string.format("  wall %.3f s  (%.1f calls/s)  kagent-rt CPU %.3f ms per call", bwall, burst_calls / bwall,
  bcpu / burst_calls * 1000))
-- Whole vs streamed: the same replies (400 characters; whole after 1 s, or as 100 deltas 10 ms
-- apart), so each takes about a second either way; the difference in kagent-rt CPU is the cost
-- of streaming.
local reply = string.rep("tok ", 100)
llm.configure{ concurrency = math.max(streams, 64) }
srv:set_script{ require_auth = false, latency = 1.0, default_text = reply }
local whole_wall, whole_cpu = run(streams, "whole", false)
srv:set_script{ require_auth = false, chunk_delay = 0.01, default_text = reply }
local before = llm.usage()
local stream_wall, stream_cpu = run(streams, "stream", true)
local after = llm.usage()
local deltas = streams * 100
print(string.format("streaming: %d concurrent calls of %d characters (100 deltas each)", streams, #reply))
print(string.format("  whole:    wall %.3f s  kagent-rt CPU %.3f ms per call", whole_wall, whole_cpu / streams * 1000))
print(string.format("  streamed: wall %.3f s  kagent-rt CPU %.3f ms per call, %.1f us per delta; "
  .. "ratio streamed/whole CPU %.2f", stream_wall, stream_cpu / streams * 1000, stream_cpu / deltas * 1e6,
  stream_cpu / math.max(whole_cpu, 1e-9)))
print(string.format("  decoding rate seen by the client: %.1f tokens/s per stream (the fake sends 100/s)",
  (after.gen_tokens - before.gen_tokens) / math.max(after.gen_seconds - before.gen_seconds, 1e-9)))
local u = llm.usage()
print(string.format("usage: %d calls, %d input + %d output tokens, %d HTTP requests, %d retries",
  u.calls, u.input_tokens, u.output_tokens, u.http_requests, u.retries))
srv:stop()
