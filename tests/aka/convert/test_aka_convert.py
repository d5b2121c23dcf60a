"""convert mode's shared harness code (tasks/common/aka-convert/aka_convert.py) without PyTorch:
the functions take torch as an argument, and these tests pass a STAND-IN (named so) that makes
"tensors" of random numbers on a named device, records every seed and fails on the meta device
where a real tensor would have no values. What they check: each case is drawn from its own seed
made from the call's, so a case is the same whether the cases before it were made or skipped;
the cases before the wanted one are made on meta; a get_inputs that needs their values is run
whole instead; and AKA's parameter alignment by name."""

import os
import random
import sys
import tempfile
import types
import unittest
from contextlib import contextmanager

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tasks", "common", "aka-convert"))

import aka_convert  # noqa: E402


class StandInTorch:
    """The few torch calls get_inputs and case_inputs make."""

    class Tensor:
        def __init__(self, values, device):
            self.values, self.device = values, device

        def to(self, device):
            return StandInTorch.Tensor(self.values, device)

        def contiguous(self):
            return self

        def item(self):
            if self.device == "meta":
                raise RuntimeError("a meta tensor has no values")
            return self.values[0]

    def __init__(self):
        self.seeds, self.made_on, self._device, self._rng = [], [], "cpu", random.Random(0)

    def manual_seed(self, seed):
        self.seeds.append(seed)
        self._rng = random.Random(seed)

    @contextmanager
    def device(self, name):
        before, self._device = self._device, name
        try:
            yield
        finally:
            self._device = before

    def rand(self, n):
        self.made_on.append(self._device)
        if self._device == "meta":
            return StandInTorch.Tensor(None, "meta")
        return StandInTorch.Tensor([self._rng.random() for _ in range(n)], self._device)


def cases_module(torch, sizes, reads_values=False, extra=None):
    def get_inputs():
        for n in sizes:
            x = torch.rand(n)
            if reads_values:
                x.item()
            yield [x] + ([extra] if extra is not None else [])
    return types.SimpleNamespace(get_inputs=get_inputs)


class CaseInputs(unittest.TestCase):
    def draw(self, torch, module, case, seed, device="cuda"):
        original = aka_convert.inputs_module
        aka_convert.inputs_module = lambda config: (module, int(config["case"]))
        try:
            return aka_convert.case_inputs(torch, {"case": case}, seed, device)
        finally:
            aka_convert.inputs_module = original

    def test_each_case_has_a_seed_of_its_own_and_earlier_cases_are_made_on_meta(self):
        t = StandInTorch()
        out = self.draw(t, cases_module(t, [4, 8, 16]), 2, seed=7)
        self.assertEqual(t.seeds, [aka_convert._mix(7, i) for i in range(3)])
        self.assertEqual(t.made_on, ["meta", "meta", "cuda"])
        self.assertEqual(list(out), ["in0"])
        self.assertEqual(out["in0"].device, "cuda")
        self.assertEqual(len(out["in0"].values), 16)
        self.assertEqual(len(set(aka_convert._mix(7, i) for i in range(32))), 32)

    def test_a_case_is_the_same_whether_the_earlier_ones_were_made_or_not(self):
        t = StandInTorch()
        skipped = aka_convert._nth_case(t, cases_module(t, [4, 8, 16]), 2, 7, "cpu", True)
        made = aka_convert._nth_case(t, cases_module(t, [4, 8, 16]), 2, 7, "cpu", False)
        self.assertEqual(skipped[0].values, made[0].values)
        other = aka_convert._nth_case(t, cases_module(t, [4, 8, 16]), 2, 8, "cpu", True)
        self.assertNotEqual(other[0].values, made[0].values)

    def test_a_get_inputs_that_reads_earlier_values_is_run_whole(self):
        t = StandInTorch()
        out = self.draw(t, cases_module(t, [4, 8, 16], reads_values=True), 1, seed=3)
        # The first case's read failed on meta; then every case up to the wanted one on the device.
        self.assertEqual(t.made_on, ["meta", "cuda", "cuda"])
        plain = StandInTorch()
        expected = aka_convert._nth_case(plain, cases_module(plain, [4, 8, 16]), 1, 3, "cuda", False)
        self.assertEqual(out["in0"].values, expected[0].values)

    def test_inputs_that_are_not_tensors_or_cases_that_do_not_exist_are_refused(self):
        t = StandInTorch()
        with self.assertRaisesRegex(ValueError, "not a tensor"):
            self.draw(t, cases_module(t, [4], extra=3), 0, seed=1)
        with self.assertRaisesRegex(ValueError, "yielded no case 5"):
            self.draw(t, cases_module(t, [4, 8]), 5, seed=1)


class HeldOutCases(unittest.TestCase):
    """A held-out configuration names a case's text (akad's rules made it from the visible ones):
    the trusted reference runs AKA's own get_inputs() with its case list replaced by that case."""

    SOURCE = (
        "import torch\n\nFEATURES = 16\n\n\ndef get_inputs():\n"
        "    configs = [\n        ([64, FEATURES],),  # a comment\n        ([33, FEATURES],),\n    ]\n"
        "    scale = 2\n    for shape in configs:\n        yield [torch.rand(shape[0][0] * scale)]\n")
    LITERAL = (
        "import torch\n\n\ndef get_inputs():\n    for b, d in [(4, 7), (16, 31)]:\n"
        "        yield [torch.rand(b * d)]\n")

    @contextmanager
    def module(self, source, torch):
        saved = (aka_convert.HARNESS, aka_convert._SPEC, dict(aka_convert._MODULES), sys.modules.get("torch"))
        aka_convert._HELD_OUT.clear()
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "aka_module.py"), "w") as f:
                f.write(source)
            aka_convert.HARNESS, aka_convert._SPEC, aka_convert._MODULES = d, {"module": "aka_module.py"}, {}
            sys.modules["torch"] = torch
            try:
                yield
            finally:
                aka_convert.HARNESS, aka_convert._SPEC, aka_convert._MODULES = saved[:3]
                if saved[3] is None:
                    sys.modules.pop("torch", None)
                else:
                    sys.modules["torch"] = saved[3]

    def test_the_case_list_bound_to_a_name_is_replaced_and_the_rest_of_get_inputs_runs(self):
        t = StandInTorch()
        with self.module(self.SOURCE, t):
            out = aka_convert.case_inputs(t, {"name": "held-out-0-prime", "case_text": "([37, FEATURES],)"}, 5, "cuda")
            self.assertEqual(len(out["in0"].values), 74)  # the module's FEATURES and get_inputs's scale still apply
            self.assertEqual(t.seeds, [aka_convert._mix(5, 0)])
            visible = aka_convert.case_inputs(t, {"name": "case-1", "case": 1}, 5, "cuda")
            self.assertEqual(len(visible["in0"].values), 66)  # the visible cases are untouched

    def test_a_literal_in_the_loop_is_replaced_and_a_case_that_is_no_expression_is_refused(self):
        t = StandInTorch()
        with self.module(self.LITERAL, t):
            out = aka_convert.case_inputs(t, {"case_text": "(5, 11)"}, 1, "cpu")
            self.assertEqual(len(out["in0"].values), 55)
            with self.assertRaises(SyntaxError):
                aka_convert.case_inputs(t, {"case_text": "(5, "}, 1, "cpu")


class Alignment(unittest.TestCase):
    def test_parameters_align_by_name_as_akas_harness_aligns_them(self):
        keys = ["fc.weight", "fc.bias", "norm.weight"]
        self.assertEqual(aka_convert._module_key("fc.weight", keys), "fc.weight")
        self.assertEqual(aka_convert._module_key("FC_Weight", keys), "fc.weight")      # case and punctuation
        self.assertEqual(aka_convert._module_key("bias", keys), "fc.bias")             # the one that ends so
        self.assertIsNone(aka_convert._module_key("weight", keys))                     # two end so: none
        self.assertEqual(aka_convert._module_key("model_norm_weight", ["norm.weight"]), "norm.weight")
        self.assertIsNone(aka_convert._module_key("scale", keys))


if __name__ == "__main__":
    unittest.main()
