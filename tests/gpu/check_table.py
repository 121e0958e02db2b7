"""The table a GPU check prints as it goes: one line per check (part, name, PASS or FAIL,
detail), and the rows as JSON under $OUT (the device run brings them back) after each."""
import json
import os


class Checks:
    def __init__(self, json_name):
        self.rows, self.ok, self.json_name = [], True, json_name

    def add(self, part, name, passed, detail, **extra):
        self.ok &= bool(passed)
        self.rows.append(dict(part=part, check=name, passed=bool(passed), detail=detail, **extra))
        print("%-8s %-52s %-4s %s" % (part, name, "PASS" if passed else "FAIL", detail), flush=True)
        out = os.environ.get("OUT")
        if out:
            with open(os.path.join(out, self.json_name), "w") as f:
                json.dump(self.rows, f, indent=1, default=str)

    def finish(self):
        """The last line, RESULT: PASS or FAIL; the exit status (0 or 1)."""
        print("RESULT:", "PASS" if self.ok else "FAIL")
        return 0 if self.ok else 1
