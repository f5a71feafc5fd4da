"""docs/results/yardstick.md: a hand edit of one of its numbers fails `results.py --check`, and
the committed per-study files reproduce the tool's own means and counts (its run JSON), which
the page's tables print (python3 -m unittest scripts/test_results_yardstick.py)."""

import importlib.util
import re
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import results  # noqa: E402

PAGE = "yardstick.md"


def load_page_module():
    spec = importlib.util.spec_from_file_location("yardstick_page", results.ROOT / "scripts/pages/yardstick.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class YardstickPage(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        results.load_modules()
        cls.y = load_page_module()

    def check(self, text: str) -> tuple[int, str]:
        """What `scripts/results.py --check` says of the page if it read `text` (exit status,
        stderr); the page's data are the committed files."""
        return results.check_text(PAGE, text)

    def test_edited_number_fails_check(self):
        on_disk = results.page_path(PAGE).read_text()
        self.assertEqual(self.check(on_disk), (0, ""))
        # The first figure of each generated table (means, gains, the --bare-headers tables,
        # the disagreements) and of the timings, changed by one in its last digit.
        anchors = ["| `iu-test-smollm2-k8-p2.jsonl` |", "| SmolLM2 p2 | ROUGE-L |",
                   "| Gemma 3 prefill | BLEU-4 |", "| SmolLM2 prefill | 540 |", "s wall;"]
        starts = [on_disk.index(a) for a in anchors[:2]]
        starts += [on_disk.rindex(anchors[2]), on_disk.index(anchors[3]), on_disk.index(anchors[4]) - 8]
        for a, start in zip(anchors, starts):
            m = re.compile(r"\d+\.\d+").search(on_disk, start + (len(a) if a.startswith("|") else 0))
            self.assertIsNotNone(m, a)
            digit = m.group()[-1]
            edited = on_disk[: m.end() - 1] + str((int(digit) + 1) % 10) + on_disk[m.end():]
            rc, err = self.check(edited)
            self.assertEqual(rc, 1, f"an edit after {a!r} passed --check")
            self.assertIn("docs/results/yardstick.md differs", err, a)

    def test_per_study_reproduces_run_means(self):
        y = self.y
        page = results.page_path(PAGE).read_text()
        for name in y.RUNS:
            run = y.run(name)
            for f in run["files"]:
                fname = Path(f["file"]).name
                rows = y.per_study(name)[fname]
                self.assertEqual(len(rows), f["studies"], (name, fname))
                self.assertEqual(len(y.scored(name, fname)), f["scored"], (name, fname))
                self.assertEqual(y.agreement(name, fname)[0], f["agree"], (name, fname))
                wf, total, differ = y.wf_counts(name, fname)
                self.assertEqual((wf, total, differ), (f["wf_yardstick"], f["wf_total"], f["wf_differs"]))
                kinds = {}
                for r in rows:
                    if r["kind"]:
                        kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
                self.assertEqual(kinds, {k: v for k, v in f["kinds"].items() if v}, (name, fname))
                self.assertAlmostEqual(y.max_abs_diff(name, fname, False)[0], f["max_abs_score_diff"], places=15)
                m, n = y.max_abs_diff(name, fname, True)
                self.assertEqual(n, f["parse_diff"]["same_parse_scored"], (name, fname))
                self.assertAlmostEqual(m, f["parse_diff"]["same_parse_max_abs"], places=15)
                pc = y.parse_counts(name, fname)
                self.assertEqual((pc["v"], pc["f"], pc["i"]), (f["parse_diff"]["valid_differs"],
                                 f["parse_diff"]["findings_differ"], f["parse_diff"]["impression_differ"]))
                cells = []
                for metric, key in (("bleu", "bleu"), ("rouge", "rouge")):
                    for who, k in (("random", "rand"), ("yardstick", "y"), ("sdr", "sdr")):
                        got = y.mean(y.series(name, fname, who, metric))
                        self.assertAlmostEqual(got, f[key][k], places=12, msg=(name, fname, metric, who))
                        cells.append(f"{f[key][k]:.4f}")
                # ... and the page's table row prints the tool's own means.
                self.assertIn(" | ".join(cells) + " |", page, (name, fname))

    def test_gain_interval_contains_estimate(self):
        y = self.y
        for f in y.FILES:
            for metric, _ in y.METRICS:
                for who, (value, ci) in y.gains("default", f, metric).items():
                    self.assertIsNotNone(ci)
                    self.assertLessEqual(ci[0], value + 1e-9, (f, metric, who))
                    self.assertGreaterEqual(ci[1], value - 1e-9, (f, metric, who))


if __name__ == "__main__":
    unittest.main()
