"""The `analyze` op (kind "problem") on the layers and forwards KernelBench Level 3 brings: recurrent
layers with their states, MultiheadAttention called with (q, k, v), torch.nn's Transformer layers
and control flow on shapes (the concrete trace). Through a real CPU-mode worker; each graph must
decompose and its functional form reproduce the model (the check the worker runs on the model's
own inputs, dtype tolerances). The same fixtures are split and composed end to end in
tests/lua/split_layers_cpu_spec.lua."""
import os
import unittest

from worker_client import CpuWorkerTest, ROOT

FUSE = os.path.join(ROOT, "tests", "fixtures", "fuse", "problems")


def by_name(result):
    return {op["name"]: op for op in result["ops"]}


class AnalyzeLayers(CpuWorkerTest):
    def analyze(self, name):
        reply = self.w.request("analyze", {"problem": os.path.join(FUSE, name)}, timeout=300)
        self.assertTrue(reply["ok"], reply)
        r = reply["result"]
        self.assertTrue(r["traced"], r.get("trace_error"))
        self.assertTrue(r["decomposable"], r.get("unsupported"))
        self.assertIs(r["functional_check"], True, "the functional form reproduces the model")
        return r

    def test_lstm_with_state_buffers(self):
        r = self.analyze("lstm_state.py")
        self.assertEqual(r["trace"], "plain")
        lstm = by_name(r)["lstm"]
        self.assertEqual(lstm["category"], "recurrent")
        self.assertFalse(lstm["tensor"], "(output, (h, c)) is a tuple")
        self.assertIn("torch.lstm(${v:x}, (${p:h0}, ${p:c0}), [${p:lstm.weight_ih_l0}", lstm["expr"])
        self.assertIn("h0", lstm["params"], "the state buffers are read as parameters, passed in")
        self.assertEqual(r["params"]["c0"]["kind"], "buffer")
        self.assertEqual(len(lstm["params"]), 2 + 2 * 4)
        self.assertEqual(len(r["outputs"]), 2)

    def test_bidirectional_gru_called_with_its_hidden_state(self):
        r = self.analyze("gru_hidden.py")
        gru = by_name(r)["gru"]
        self.assertTrue(gru["expr"].startswith("torch.gru(${v:x}, ${v:h0}, ["), gru["expr"])
        self.assertIn("${p:gru.bias_hh_l1_reverse}]", gru["expr"])
        self.assertEqual([i["name"] for i in r["inputs"]], ["x", "h0"])

    def test_multihead_attention_with_query_key_value(self):
        r = self.analyze("attention_qkv.py")
        attn = by_name(r)["attn"]
        self.assertEqual(attn["category"], "attention")
        self.assertIn("multi_head_attention_forward(${v:q}.transpose(1, 0), ${v:kv}.transpose(1, 0), "
                      "${v:kv}.transpose(1, 0), 16, 4", attn["expr"], "batch first: sequence-first inside")
        self.assertEqual(attn["inputs"], ["q", "kv"])
        self.assertIn("attn.out_proj.weight", attn["params"])

    def test_transformer_encoder_layers_are_traced_through(self):
        r = self.analyze("transformer_layer.py")
        self.assertEqual(r["trace"], "concrete", "torch.nn's layers branch on metadata")
        cats = [op["category"] for op in r["ops"]]
        self.assertEqual(cats.count("attention"), 2)
        self.assertEqual(cats.count("gemm"), 5, "the projection and two feed-forward Linears a layer")
        self.assertEqual(cats.count("norm"), 4)

    def test_control_flow_on_shapes_is_traced_at_the_problem_shapes(self):
        r = self.analyze("shape_control_flow.py")
        self.assertEqual(r["trace"], "concrete")
        ops = by_name(r)
        self.assertEqual(sum(1 for op in r["ops"] if op["op"] == "tanh"), 5, "the loop over 5 steps, unrolled")
        self.assertIn("pad", ops, "the branch on an odd extent taken")
        self.assertEqual(ops["zeros"]["expr"], "torch.zeros(2, 6, device=${v:x}.device)",
                         "the default state is made, on the input's device, not kept as a constant")
        self.assertEqual(ops["zeros"]["inputs"], ["x"], "it reads the input whose device it takes")
        self.assertEqual([i["name"] for i in r["inputs"]], ["x"], "h, left to its default, is no input")

    def test_number_made_on_the_input_device_stays_there(self):
        # on a GPU a CPU bound fails clamp ("max is on cpu"): the form must make it where the
        # forward did, whatever device this test runs on
        r = self.analyze("device_constant.py")
        clamp = by_name(r)["clamp"]
        self.assertIn("max=torch.tensor(", clamp["expr"])
        self.assertTrue(clamp["expr"].endswith(".to(${p:logit_scale}.device))"), clamp["expr"])

    def test_number_made_on_a_concrete_device_stays_there(self):
        # the concrete trace runs the forward with real inputs: the bound is made on the input's
        # device itself (a GPU there), so nothing says so but the device the forward asked for
        r = self.analyze("device_constant_concrete.py")
        self.assertEqual(r["trace"], "concrete")
        clamp = by_name(r)["clamp"]
        self.assertTrue(clamp["expr"].endswith(".to(${p:logit_scale}.device))"), clamp["expr"])

    def test_control_flow_on_data_is_still_refused(self):
        reply = self.w.request("analyze", {"problem": os.path.join(FUSE, "control_flow.py")}, timeout=300)
        r = reply["result"]
        self.assertFalse(r["traced"])
        self.assertTrue(r["control_flow"], r.get("trace_error"))


class ConcreteTraceLeavesTheModel(unittest.TestCase):
    """The concrete trace runs the forward: what the forward writes (batch norm's running
    statistics, an attribute it assigns) is put back, so the analysis then runs the model as
    built. In-process: fx_trace on a small model."""

    def test_model_state_restored(self):
        import sys
        sys.path.insert(0, os.path.join(ROOT, "src", "gpu", "eval"))
        import torch
        from kagent_eval.analyze import fx_trace

        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.bn = torch.nn.BatchNorm1d(4)
                self.last = None

            def forward(self, x):
                if x.size(0) > 1:  # a branch on a shape: the plain trace cannot follow it
                    x = self.bn(x)
                self.last = x
                return x * 2

        m = M()
        x = torch.randn(3, 4) * 5 + 3
        with self.assertRaises(Exception):
            fx_trace.plain(torch, m)
        gm = fx_trace.concrete(torch, m, [x])
        self.assertTrue(torch.equal(m.bn.running_mean, torch.zeros(4)), "running statistics put back")
        self.assertEqual(int(m.bn.num_batches_tracked), 0)
        self.assertIsNone(m.last, "the attribute the forward assigned put back")
        with torch.no_grad():
            self.assertTrue(torch.allclose(gm(x), M.forward(m, x)))


if __name__ == "__main__":
    unittest.main()
