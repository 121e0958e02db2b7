"""GPU check of the timer's own stream (exits 77 = skipped without a GPU): the untimed work
between timed calls runs on a stream the timer made through the driver (timing.Timer.prep_stream,
cuda_driver.own_stream), which the all-stream check excuses between calls. No stream that torch
hands a candidate may be it.
  1. the positive control: torch's pool does hand the same stream out again (round robin), so a
     pooled stream could be asked for until it came back;
  2. the timer's stream is none of the streams torch.cuda.Stream() hands out, at any priority,
     over twice the pool's length, nor the current stream;
  3. work put on it runs there and finishes (a fill read back);
  4. a timed loop with a feed on it, traced where libkagent_prof is found: its all-stream check
     passes, with the timer's stream as the loop's only gap stream.
Usage: python3 tests/gpu/harness_stream_gpu_check.py"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "src", "gpu", "eval"))
from check_table import Checks  # noqa: E402

POOL_ASKS = 96  # torch pools 32 streams per priority: three times round


def main():
    try:
        import torch
    except ImportError:
        print("SKIP: torch is not installed")
        return 77
    if not torch.cuda.is_available():
        print("SKIP: no CUDA device")
        return 77
    from kagent_eval.child import child_common
    torch.cuda.set_device(0)
    timer = child_common.timer(torch, "cuda:0")
    own = timer.prep_stream.cuda_stream
    run = Checks("harness_stream_gpu_check.json")

    first = torch.cuda.Stream()
    again = [torch.cuda.Stream().cuda_stream for _ in range(POOL_ASKS)]
    run.add("pool", "control: torch hands a pooled stream out again", first.cuda_stream in again,
            "within %d asks" % POOL_ASKS)
    pooled = {first.cuda_stream, *again, torch.cuda.current_stream().cuda_stream}
    for priority in (-1, -2, 0):
        pooled.update(torch.cuda.Stream(priority=priority).cuda_stream for _ in range(POOL_ASKS))
    run.add("stream", "the timer's stream is none torch hands out", own not in pooled,
            "%#x against %d streams" % (own, len(pooled)))

    x = torch.empty(1 << 20, device="cuda:0")
    with torch.cuda.stream(timer.prep_stream):
        x.fill_(3.0)
    timer.prep_stream.synchronize()
    run.add("stream", "a fill put on the timer's stream ran there", bool((x == 3.0).all()), "")

    class Feed:  # an input set's move, made by the loop on its stream between calls
        def before(self, i, plan):
            x.add_(1.0)

    y = torch.empty_like(x)
    summary = timer.measure(lambda: torch.mul(x, 2.0, out=y), feed=Feed(), reps=20)
    streams = summary.get("all_streams")
    if timer.tracer is None:
        run.add("loop", "a timed loop with a feed on it ran 20 calls", summary["n"] == 20,
                "untraced here: %s" % timer.untraced)
    else:
        run.add("loop", "a traced loop with a feed on it passes all-stream",
                bool(streams and streams["ok"] and streams["outside_windows"] == 0),
                str({k: (streams or {}).get(k) for k in ("ok", "outside_windows", "escaped_calls")}))
    return run.finish()


if __name__ == "__main__":
    sys.exit(main())
