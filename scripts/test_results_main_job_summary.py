"""The main job's closing summary (scripts/main_job_summary.py) reads the pruning table that
scripts/pruning-results.sh writes, and says so when it is not there.

    python3 -m unittest discover -q -s scripts -p "test_results*.py"
"""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def write_csv(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


class Summary(unittest.TestCase):
    def run_summary(self, out: Path, pruning: Path) -> str:
        r = subprocess.run([sys.executable, str(HERE / "main_job_summary.py"), "--out", str(out),
                            "--pruning", str(pruning)], capture_output=True, text=True, check=True)
        return r.stdout

    def test_the_pruning_line_reads_the_table_pruning_results_writes(self):
        # The committed table of the gemma3 set is the file pruning-results.sh writes as
        # results/pruning/gemma3-table.csv (its commit step copies it).
        self.assertIn('"$OUT/$SET-table.md"', (ROOT / "scripts/pruning-results.sh").read_text())
        with tempfile.TemporaryDirectory() as tmp:
            out, pruning = Path(tmp, "main-job"), Path(tmp, "pruning")
            out.mkdir()
            pruning.mkdir()
            for sec in ("findings", "impression"):
                write_csv(out / f"{sec}_vs_random_wf.csv", [
                    {"policy": "chamfer@min", "ROUGE-L [%]": "10", "ROUGE-L [%] 95% low": "1",
                     "ROUGE-L [%] 95% high": "20"},
                    {"policy": "clinical/chamfer@min", "ROUGE-L [%]": "-5", "ROUGE-L [%] 95% low": "-9",
                     "ROUGE-L [%] 95% high": "-1"},
                ])
            missing = self.run_summary(out, pruning)
            self.assertIn("Pruning: no chamfer@min standard / pruning wu1 rows", missing)
            self.assertIn("(missing)", missing)
            shutil.copy(ROOT / "docs/results/pruning/gemma3/table.csv", pruning / "gemma3-table.csv")
            text = self.run_summary(out, pruning)
            with (pruning / "gemma3-table.csv").open(newline="") as f:
                rows = {r["policy"]: r for r in csv.DictReader(f)}
            saved = float(rows["chamfer@min pruning wu1"]["tokens saved %"])
            self.assertIn(f"Pruning (chamfer@min, warm-up 1): {saved:.1f} % of tokens saved", text)
            self.assertIn(f"intervals: {pruning / 'gemma3-table.md'}", text)
            self.assertIn("cosine   (1): ROUGE-L +10.0 % (1 up, 0 down)", text)
            self.assertIn("clinical (1): ROUGE-L -5.0 % (0 up, 1 down)", text)


if __name__ == "__main__":
    unittest.main()
