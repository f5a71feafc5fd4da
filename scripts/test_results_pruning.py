"""The pruning pages (docs/results/pruning.md, pruning-smollm2.md, pruning-gap.md) against their
committed per-study files (docs/results/pruning/<set>/, scripts/pages/pruning_tables.py).

    python3 -m unittest discover -q -s scripts -p "test_results*.py"
"""

from __future__ import annotations

import importlib.util
import re
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import results  # noqa: E402

spec = importlib.util.spec_from_file_location(
    "pruning_tables_under_test", Path(__file__).resolve().parent / "pages/pruning_tables.py")
pt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pt)


def check(name: str, text: str) -> tuple[int, str]:
    """What `scripts/results.py --check` says of the page if it read `text` (exit status,
    stderr); the page's data are the committed files."""
    return results.check_text(name, text)


def sets():
    return [s for s in (pt.load(n) for n in ("gemma3", "standins", "smollm2")) if s is not None]


class PruningPages(unittest.TestCase):
    def test_pages_match_their_data(self):
        for name in ("pruning.md", "pruning-gap.md", "pruning-smollm2.md"):
            if name == "pruning-smollm2.md" and pt.load("smollm2") is None:
                continue
            rc, err = check(name, results.page_path(name).read_text())
            self.assertEqual((rc, err), (0, ""), name)

    def test_one_edited_table_number_fails(self):
        text = results.page_path("pruning.md").read_text()
        # A cell of the values table ("| chamfer@min standard | 63506 | 0.0 | 100.0 | 0.008 |") and one
        # of the change table ("+7.9 [-27.7, +60.4]").
        for pattern in (r"(\| chamfer@min standard \| \d+ \| [\d.]+ \| [\d.]+ \| )(\d)",
                        r"(\| chamfer@min pruning wu1 vs chamfer@min standard \| [-+][\d.]+ \[[-+][\d.]+, [-+][\d.]+\]\*? \| [-+])(\d)"):
            m = re.search(pattern, text)
            self.assertIsNotNone(m, pattern)
            edited = text[: m.start(2)] + str((int(m.group(2)) + 1) % 10) + text[m.end(2):]
            rc, err = check("pruning.md", edited)
            self.assertEqual(rc, 1, pattern)
            self.assertIn("docs/results/pruning.md differs", err)

    def test_per_study_values_reproduce_sdr_eval_tables(self):
        """Every mean, corpus-level F1, change and interval recomputed from per_study.jsonl.gz equals
        the full-precision table sdr eval wrote from the same values (table.csv)."""
        for rs in sets():
            for run in ["random"] + rs.runs:
                for col, v in rs.row(run).items():
                    cell = rs.csv[run][col]
                    if v is None:
                        self.assertEqual(cell, "", (rs.name, run, col))
                    else:
                        self.assertAlmostEqual(v, float(cell), delta=1e-9, msg=(rs.name, run, col))
            for a, b in rs.compares:
                row = rs.csv_changes[f"{a} vs {b}"]
                for col, c in rs.change_row(a, b).items():
                    if c is None:
                        self.assertEqual(row[col], "", (rs.name, a, col))
                        continue
                    self.assertAlmostEqual(c[0], float(row[col]), delta=1e-9, msg=(rs.name, a, col))
                    lo, hi = row[f"{col} 95% low"], row[f"{col} 95% high"]
                    if c[1] is None:
                        self.assertEqual(lo, "", (rs.name, a, col))
                    else:
                        self.assertAlmostEqual(c[1][0], float(lo), delta=1e-9, msg=(rs.name, a, col))
                        self.assertAlmostEqual(c[1][1], float(hi), delta=1e-9, msg=(rs.name, a, col))

    def test_f1_matches_a_direct_count(self):
        # Two observations present in the hypothesis, one matching the reference.
        tp, fp, fn = pt.packed("00100000001000", "00100000000010")
        cols = pt.f1_columns(tp, fp, fn)
        self.assertAlmostEqual(cols[1], 2 * 1 / (2 * 1 + 1 + 1))  # micro-14
        self.assertAlmostEqual(cols[0], 1 / 14)                   # macro-14: Cardiomegaly only


if __name__ == "__main__":
    unittest.main()
