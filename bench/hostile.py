#!/usr/bin/env python3
"""Reliability bench: what each hostile candidate reaches through a real CPU-mode worker.

    /usr/bin/python3 bench/hostile.py [--setups root,root-nons,user,user-nons] [--json out.json]

The candidates are tests/eval/hostile_cases.py's (fork bomb, 300 children, /dev/shm hog, shared
mmap hog, host UNIX socket by path, a tmux server's and an ssh-agent's socket in /tmp and in a
home folder, abstract UNIX socket, SIGKILL to a process of the same user, /etc/shadow, writes
outside the job, descriptors 7 and 8 left open by the worker's parent, a fork bomb that never
stops on its own), each run as a verify job in each setup: the worker run by
root with namespaces ("root") and without (KAGENT_EVAL_NAMESPACES=0, "root-nons"), and, when
this runs as root, by an ordinary user made for the bench ("user", "user-nons"). It prints one
table row per candidate and setup: the job's code and what the candidate reached ("nothing" is
the goal), and the layer the worker reports missing where it does. Every case runs whatever the
worker reports, so KAGENT_EVAL_PYTHONPATH=<another copy of src/gpu/eval> shows what an earlier
evaluator let through. Exits 1 when a candidate reached anything where the worker did not report
the layer that stops it missing (a row whose layer this machine lacks is counted apart).
"""
import argparse
import json
import os
import pwd
import secrets
import shutil
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "eval"))
import hostile_cases  # noqa: E402
from worker_client import Worker  # noqa: E402

SETUPS = {"root": ({}, False), "root-nons": ({"KAGENT_EVAL_NAMESPACES": "0"}, False),
          "user": ({}, True), "user-nons": ({"KAGENT_EVAL_NAMESPACES": "0"}, True)}


def run_setup(name, env, as_user):
    user = None
    if as_user:
        if os.geteuid() != 0 or not shutil.which("useradd"):
            return [{"setup": name, "case": "-", "code": "-", "reached": "skipped: needs root and useradd"}]
        user = "kagent-bench-%s" % secrets.token_hex(3)
        subprocess.run(["useradd", "--no-create-home", "--home-dir", "/nonexistent",
                        "--shell", "/usr/sbin/nologin", user], check=True)
    rows = []
    w = None
    try:
        uid = pwd.getpwnam(user).pw_uid if user else os.getuid()
        w = Worker("cpu", env=dict(KAGENT_EVAL_MEMORY_MB=str(hostile_cases.MEMORY_MB), **env), user=user)
        status = w.ready.get("sandbox", {})
        print("%-10s worker: %s" % (name, json.dumps(status)), flush=True)
        for case_class in hostile_cases.CASES:
            row = {"setup": name, "case": case_class.name}
            if not hostile_cases.applicable(case_class, uid):
                why = hostile_cases.unavailable(case_class) or "root only"
                rows.append(dict(row, code="-", reached="not applicable (%s)" % why))
                continue
            missing = case_class.layer(status) if "missing" in status else "no status"
            case = case_class(uid, status)
            try:
                result, reached = case.run(w)
                row.update(code=result.get("code") or "ok", reached=reached or "nothing")
            except Exception as e:  # a worker that died is a finding too
                row.update(code="-", reached="bench error: %s" % e)
            if missing:  # the worker's own words are in its status line above
                row["layer_missing"] = missing.split(" here (")[0]
            rows.append(row)
            print("%-10s %-46s %-12s %s" % (row["setup"], row["case"], row["code"], row["reached"]),
                  flush=True)
    finally:
        if w:
            w.close()
            if user:
                shutil.rmtree(w.ready.get("sandbox", {}).get("root", "/nonexistent-kagent"), True)
        if user:
            subprocess.run(["userdel", user], check=False)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--setups", default=",".join(SETUPS))
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = []
    print("%-10s %-46s %-12s %s" % ("setup", "candidate", "code", "reached"))
    for name in args.setups.split(","):
        env, as_user = SETUPS[name]
        rows += run_setup(name, env, as_user)
    print()
    print("| setup | candidate | code | reached |")
    print("|---|---|---|---|")
    for r in rows:
        reached = r["reached"] + (" (layer missing: %s)" % r["layer_missing"] if r.get("layer_missing") else "")
        print("| %s | %s | %s | %s |" % (r["setup"], r["case"], r["code"], reached))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    reached = [r for r in rows if r["reached"] != "nothing"
               and not r["reached"].startswith(("not applicable", "skipped"))]
    bad = [r for r in reached if not r.get("layer_missing")]
    print("\n%d of %d reached something where the worker has the layer that should stop it; "
          "%d more where the worker reports that layer missing on this machine" % (
              len(bad), len(rows), len(reached) - len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
