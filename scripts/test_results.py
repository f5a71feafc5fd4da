"""The results check catches a page edited by hand: every generated page and block, with one
number changed, must differ from what its data give (python3 -m unittest scripts/test_results.py)."""

import re
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import results  # noqa: E402


class GeneratedPages(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        results.load_modules()

    def test_every_page_matches_its_data(self):
        for name in results.page_names():
            on_disk = results.page_path(name).read_text()
            self.assertEqual(on_disk, results.expected(name, on_disk), name)

    def test_one_edited_number_fails(self):
        for name in results.page_names():
            on_disk = results.page_path(name).read_text()
            # The first number inside generated text: the whole page, or the first block.
            start = 0
            if name not in results.PAGES:
                start = on_disk.index("<!-- results:") + len("<!-- results:")
                start = on_disk.index("-->", start)
            m = re.compile(r"\d+\.\d+").search(on_disk, start)
            self.assertIsNotNone(m, name)
            digit = m.group()[-1]
            edited = on_disk[: m.end() - 1] + str((int(digit) + 1) % 10) + on_disk[m.end():]
            self.assertNotEqual(edited, results.expected(name, edited), f"{name}: an edit at {m.group()} passed")

    def test_an_edited_number_in_any_block_fails(self):
        # Every block, not only a page's first: a number edited inside it must not pass.
        for (name, block) in results.BLOCKS:
            on_disk = results.page_path(name).read_text()
            begin = f"<!-- results:{block}:begin -->"
            start = on_disk.index(begin) + len(begin)
            end = on_disk.index(f"<!-- results:{block}:end -->")
            m = re.compile(r"\d").search(on_disk, start, end)
            self.assertIsNotNone(m, f"{name}: block {block} has no number")
            edited = on_disk[: m.start()] + str((int(m.group()) + 1) % 10) + on_disk[m.end():]
            self.assertNotEqual(edited, results.expected(name, edited), f"{name}: an edit in block {block} passed")


class FaithfulnessBootstrap(unittest.TestCase):
    """summarize.py's packed-integer Bootstrap gives judge_row.py's plain bootstrap over studies."""

    def test_matches_a_plain_bootstrap(self):
        import importlib.util
        import random

        spec = importlib.util.spec_from_file_location(
            "summarize", results.ROOT / "bench/faithfulness/summarize.py")
        s = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(s)
        rng = random.Random(1)
        cfgs = ["cosine/chamfer", "clinical/chamfer"]
        lines = []
        for uid in range(40):
            for kind in s.KINDS:
                if rng.random() < 0.3 and kind != "unrelated":
                    continue
                score = lambda: round(rng.uniform(-0.5, 3), 6)
                lines.append({"uid": uid, "kind": kind, "self": {c: score() for c in cfgs},
                              "candidate": {c: round(rng.choice([1.5, rng.uniform(0, 3)]), 6) for c in cfgs}})
        boot = s.Bootstrap(lines, cfgs, wins=cfgs, resamples=200, seed=7)
        by = {}
        for ln in lines:
            by.setdefault(ln["uid"], []).append(ln)
        studies = [by[u] for u in sorted(by)]
        draw = random.Random(7)
        samples = [draw.choices(studies, k=len(studies)) for _ in range(200)]

        def drop(sample, c, kinds):
            xs = [l["self"][c] - l["candidate"][c] for st in sample for l in st if l["kind"] in kinds]
            return sum(xs) / len(xs)

        def share(sample, c, e):
            w = n = 0
            for st in sample:
                ks = {l["kind"]: l["candidate"][c] for l in st}
                if "rephrase" in ks and e in ks:
                    a, b = ks["rephrase"], ks[e]
                    w, n = w + (1 if a > b else 0.5 if a == b else 0), n + 1
            return w / n

        checks = [
            (("ratio", "clinical/chamfer", "reversed", "unrelated"),
             lambda x: drop(x, "clinical/chamfer", s.REVERSED) / drop(x, "clinical/chamfer", ("unrelated",))),
            (("share", "cosine/chamfer", "severity"), lambda x: share(x, "cosine/chamfer", "severity")),
            (("diff", ("drop", "clinical/chamfer", "omission"), ("drop", "cosine/chamfer", "omission")),
             lambda x: drop(x, "clinical/chamfer", ("omission",)) - drop(x, "cosine/chamfer", ("omission",))),
        ]
        for q, plain in checks:
            value, low, high = boot.interval(*q)
            xs = [plain(x) for x in samples]
            self.assertAlmostEqual(value, plain(studies), places=9, msg=q)
            self.assertAlmostEqual(low, s.percentile(xs, 0.025), places=9, msg=q)
            self.assertAlmostEqual(high, s.percentile(xs, 0.975), places=9, msg=q)


class GrpoPage(unittest.TestCase):
    """docs/results/grpo.md: its tables and figures are generated (scripts/pages/grpo_report.py)."""

    @classmethod
    def setUpClass(cls):
        results.load_modules()

    def edited_grpo(self, block: str) -> str:
        """grpo.md with the first figure inside `block` changed by one in its last digit."""
        on_disk = results.page_path("grpo.md").read_text()
        begin = f"<!-- results:{block}:begin -->"
        start = on_disk.index(begin) + len(begin)
        m = re.compile(r"\d+\.\d+").search(on_disk, start, on_disk.index(f"<!-- results:{block}:end -->"))
        self.assertIsNotNone(m, block)
        digit = m.group()[-1]
        return on_disk[: m.end() - 1] + str((int(digit) + 1) % 10) + on_disk[m.end():]

    def check_grpo(self, text: str) -> tuple[int, str]:
        """What `scripts/results.py --check` says of the page if it read `text` (exit status,
        stderr); the page's data are the committed files."""
        return results.check_text("grpo.md", text)

    def test_edited_grpo_number_fails_check(self):
        rc, err = self.check_grpo(results.page_path("grpo.md").read_text())
        self.assertEqual((rc, err), (0, ""))
        for block in ("main-tables", "training-table", "reward-and-encoders", "kl-and-cham", "sft-run"):
            rc, err = self.check_grpo(self.edited_grpo(block))
            self.assertEqual(rc, 1, f"an edit in block {block} passed --check")
            self.assertIn("docs/results/grpo.md differs", err, block)

    def test_bootstrap_reproduces_summary_intervals(self):
        # grpo_report's Python port of sdr_eval::bootstrap gives summary.json's intervals against SFT.
        import importlib.util

        spec = importlib.util.spec_from_file_location("grpo_report", results.ROOT / "scripts/pages/grpo_report.py")
        g = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(g)
        s = g.summary()
        for policy in list(s["summaries"])[1:]:
            for enc in (False, True):
                rows, base = g.scores(policy, enc), g.scores("SFT", enc)
                for sec in g.SECTIONS:
                    for m in (("BERTScore-F1",) if enc else ("BLEU-4", "ROUGE-L", "METEOR", "BERTScore-F1")):
                        key = f"{sec}/{g.REWARD_ENC if enc else m}"
                        lo, hi = g.paired_change([r[sec][m] for r in rows], [r[sec][m] for r in base])
                        want = s["intervals_vs_first"][policy][key]
                        self.assertAlmostEqual(lo, want[0], places=9, msg=(policy, key))
                        self.assertAlmostEqual(hi, want[1], places=9, msg=(policy, key))


class GrpoImpressionPage(unittest.TestCase):
    """docs/results/grpo-impression.md: the attempts' per-study values reproduce their summaries."""

    def test_per_study_values_reproduce_summary(self):
        # Means and intervals against each attempt's baseline, from per_study.jsonl.gz through the
        # page's bootstrap, equal what evaluate_impression.py wrote with sdr_rewards.metrics.
        import importlib.util

        spec = importlib.util.spec_from_file_location(
            "grpo_impression_text", results.ROOT / "scripts/pages/grpo_impression_text.py")
        g = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(g)
        for key, rel in g.SUMMARIES.items():
            s = g.load(rel)
            values = g.per_study(str(Path(rel).parent))
            names = list(s["summaries"])
            for policy in names:
                for col in g.PAIR_COLUMNS:
                    mean = sum(values[policy][col]) / s["studies"]
                    self.assertAlmostEqual(mean, s["summaries"][policy][col], places=12, msg=(key, policy, col))
            for policy in names[1:]:
                for col in g.PAIR_COLUMNS:
                    want = s["intervals_vs_first"][policy].get(col)
                    base = values[names[0]][col]
                    got = g.report.paired_change(values[policy][col], base) if any(base) else None
                    self.assertEqual(want is None, got is None, (key, policy, col))
                    if want is not None:
                        self.assertAlmostEqual(got[0], want[0], places=9, msg=(key, policy, col))
                        self.assertAlmostEqual(got[1], want[1], places=9, msg=(key, policy, col))


if __name__ == "__main__":
    unittest.main()
