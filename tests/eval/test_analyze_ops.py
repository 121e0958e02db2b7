"""The `analyze` op's kind "ops" (fx_ops.py) through a real CPU-mode worker: a problem's
operations from its torch.fx trace, counted by category, which the agents' op class reads."""
import os
import tempfile
import textwrap
import unittest

from worker_client import CpuWorkerTest, ROOT

EXAMPLES = os.path.join(ROOT, "examples", "problems")

LOSSES = textwrap.dedent("""
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.ce = nn.CrossEntropyLoss()

        def forward(self, logits, target, a, p, n):
            return self.ce(logits, target) + torch.nn.functional.triplet_margin_loss(a, p, n)

    def get_inputs():
        return [torch.randn(4, 5), torch.randint(0, 5, (4,)), torch.randn(4, 8), torch.randn(4, 8),
                torch.randn(4, 8)]

    def get_init_inputs():
        return []
""")


class AnalyzeOps(CpuWorkerTest):
    def ops(self, problem):
        reply = self.w.request("analyze", {"kind": "ops", "problem": problem}, timeout=300)
        self.assertTrue(reply["ok"], reply)
        r = reply["result"]
        self.assertTrue(r["ok"] and r["traced"], r)
        return r

    def test_layers_by_category(self):
        r = self.ops(os.path.join(EXAMPLES, "l2_conv_bn_relu_small.py"))
        self.assertEqual(r["trace"], "plain", "the model is not run where torch.fx's own trace works")
        self.assertEqual(r["labels"], ["BatchNorm2d", "Conv2d", "ReLU"])
        self.assertEqual(r["categories"], {"conv": 1, "norm": 1, "activation": 1})

    def test_losses_are_their_own_category(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "losses.py")
            with open(path, "w") as f:
                f.write(LOSSES)
            r = self.ops(path)
        self.assertEqual(r["labels"], ["CrossEntropyLoss", "add", "triplet_margin_loss"])
        self.assertEqual(r["categories"], {"loss": 2, "elementwise": 1})


if __name__ == "__main__":
    unittest.main()
