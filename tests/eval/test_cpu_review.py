"""Extra trials (src/gpu/eval/kagent_eval/common/extra_trials.py): inputs a reviewer proposed, run as
trials of the kernel. A kernel wrong only on a non-contiguous input, or only after a call with
another batch size, passes the regular trials and is refused (EREVIEW) through a proposal that
describes that input; a correct kernel passes the same proposals; a proposal outside its form or
the problem's contract is refused with its reason and judges nothing. Through a real CPU-mode
worker."""
import os
import sys
import unittest

from worker_client import CpuWorkerTest, ROOT, fixture

sys.path.insert(0, os.path.join(ROOT, "src", "gpu", "eval"))
from kagent_eval.common import extra_trials  # noqa: E402

PROBLEM = os.path.join(ROOT, "examples", "problems", "rmsnorm_small.py")  # batch_size 4
TRANSPOSED = {"id": "t", "calls": [{"inputs": [{"layout": "transposed", "values": "large"}]}]}
NEW_BATCH = {"id": "b", "why": "a second call with another batch size",
             "calls": [{"sizes": {"batch_size": 2}}, {"sizes": {"batch_size": 8}}]}
OTHER_LAYOUTS = {"id": "s", "calls": [{"inputs": [{"layout": "strided"}]},
                                      {"inputs": [{"layout": "offset", "values": "zeros"}]}]}


def review_fixture(name):
    return fixture("eval", "review", name)


class ReviewJobTest(CpuWorkerTest):
    def job(self, candidate, proposals, op="verify"):
        return self.w.job(op, PROBLEM, review_fixture(candidate), extra_trials=proposals)

    def test_the_kernels_pass_the_regular_trials(self):
        for name in ("contiguous_only.py", "first_batch.py", "correct.py"):
            r = self.w.job("verify", PROBLEM, review_fixture(name))
            self.assertTrue(r["ok"], "%s: %s" % (name, r.get("error")))
            self.assertNotIn("review", r)

    def test_a_kernel_wrong_on_a_transposed_input_is_refused_through_the_proposal(self):
        outside = {"id": "minus", "calls": [{"inputs": [{"values": "negative"}]}]}
        r = self.job("contiguous_only.py", [NEW_BATCH, TRANSPOSED, outside])
        self.assertFalse(r["ok"])
        self.assertEqual((r["stage"], r["code"]), ("correctness", "EREVIEW"))
        failed = r["review"]["failed"]
        self.assertEqual((failed["id"], failed["call"]), ("t", 1))
        self.assertEqual(failed["proposal"]["calls"][0]["inputs"][0]["layout"], "transposed")
        self.assertIn("reviewer input t, call 1 of 1", r["error"])
        self.assertEqual(r["review"]["passed"], ["b"])  # a new batch size does not break it
        # a proposal the contract refuses is recorded even after another one broke the kernel
        self.assertEqual([x["id"] for x in r["review"]["refused"]], ["minus"])

    def test_a_kernel_keeping_its_first_batch_size_is_refused_on_the_second_call(self):
        r = self.job("first_batch.py", [TRANSPOSED, NEW_BATCH], op="benchmark")
        self.assertFalse(r["ok"])
        self.assertEqual(r["code"], "EREVIEW")
        self.assertEqual((r["review"]["failed"]["id"], r["review"]["failed"]["call"]), ("b", 1))

    def test_a_correct_kernel_passes_the_same_proposals(self):
        r = self.job("correct.py", [TRANSPOSED, NEW_BATCH, OTHER_LAYOUTS], op="benchmark")
        self.assertTrue(r["ok"], r.get("error"))
        self.assertEqual(r["review"]["passed"], ["t", "b", "s"])
        self.assertEqual(r["review"]["refused"], [])
        self.assertEqual(r["trials"], 5)  # the regular trials are counted as before

    def test_proposals_outside_their_form_or_the_contract_are_refused_with_a_reason(self):
        bad = [
            {"id": "name", "calls": [{"sizes": {"features": 8}}]},  # a constructor argument
            {"id": "grow", "calls": [{"sizes": {"batch_size": 4, "dim1": 128, "dim2": 128}}]},
            {"id": "sign", "calls": [{"inputs": [{"values": "negative"}]}]},  # torch.rand: >= 0
            {"id": "word", "calls": [{"inputs": [{"layout": "diagonal"}]}]},
            {"id": "code", "calls": [{"python": "x = 1"}]},
            {"id": "many", "calls": [{"inputs": [{}, {}]}]},  # the problem takes one input
            "not an object",
        ]
        r = self.job("contiguous_only.py", bad)
        self.assertTrue(r["ok"], r.get("error"))  # a refused proposal judges nothing
        reasons = {x["id"]: x["reason"] for x in r["review"]["refused"]}
        self.assertEqual(sorted(reasons), ["code", "grow", "many", "name", "p7", "sign", "word"])
        self.assertIn("features is not a size constant", reasons["name"])
        self.assertIn("grow the problem 16.0 times", reasons["grow"])
        self.assertIn("it is never negative", reasons["sign"])
        self.assertIn("layout must be one of", reasons["word"])
        self.assertIn("fields this evaluator does not run: python", reasons["code"])
        self.assertIn("takes 1 inputs, the call describes 2", reasons["many"])
        self.assertEqual(r["review"]["passed"], [])

    def test_a_proposal_the_reference_overflows_on_is_refused(self):
        huge = {"id": "huge", "calls": [{"inputs": [{"values": "huge"}]}]}
        r = self.w.job("verify", "cumprod_signed_problem.py", fixture("eval", "cumprod_good.py"),
                       extra_trials=[huge])
        self.assertTrue(r["ok"], r.get("error"))
        self.assertIn("is not finite on these inputs", r["review"]["refused"][0]["reason"])

    def test_extra_trials_that_are_not_a_list_are_a_bad_request(self):
        job = dict(problem=PROBLEM, candidate=review_fixture("correct.py"), extra_trials={"a": 1})
        reply = self.w.request("verify", job)
        self.assertFalse(reply["ok"])
        self.assertIn("extra_trials must be a list", str(reply))


class FormTest(unittest.TestCase):
    def test_a_flat_proposal_is_one_call_and_ids_are_kept_or_made(self):
        out = extra_trials.normalize([{"sizes": {"batch_size": 3}}, {"id": "bad id!", "calls": [{}]}])
        self.assertEqual(out["refused"], [])
        self.assertEqual([p["id"] for p in out["proposals"]], ["p1", "p2"])
        self.assertEqual(out["proposals"][0]["calls"], [{"sizes": {"batch_size": 3}, "inputs": []}])

    def test_at_most_a_few_proposals_and_calls_run(self):
        out = extra_trials.normalize([{"calls": [{}]}] * (extra_trials.MAX_PROPOSALS + 1)
                                     + [{"calls": [{}] * (extra_trials.MAX_CALLS + 1)}])
        self.assertEqual(len(out["proposals"]), extra_trials.MAX_PROPOSALS)
        self.assertEqual(len(out["refused"]), 2)

    def test_same_as_names_an_earlier_input_only(self):
        out = extra_trials.normalize([{"calls": [{"inputs": [{"same_as": 0}]}]},
                                      {"calls": [{"inputs": [{}, {"same_as": 0}]}]}])
        self.assertEqual(len(out["refused"]), 1)
        self.assertIn("same_as names an earlier input", out["refused"][0]["reason"])


class PromptTest(unittest.TestCase):
    """The reviewer's prompt and role state this module's words and limits (one truth: here)."""

    def test_the_prompt_names_every_word_and_the_role_the_limits(self):
        with open(os.path.join(ROOT, "prompts", "review.md")) as f:
            prompt = f.read()
        for word in extra_trials.VALUES + extra_trials.LAYOUTS:
            self.assertIn(word, prompt)
        with open(os.path.join(ROOT, "agents", "roles", "reviewer.lua")) as f:
            role = f.read()
        self.assertIn("M.MAX_PROPOSALS, M.MAX_CALLS, M.GROWTH = %d, %d, %d" % (
            extra_trials.MAX_PROPOSALS, extra_trials.MAX_CALLS, extra_trials.MAX_GROWTH), role)


if __name__ == "__main__":
    unittest.main()
