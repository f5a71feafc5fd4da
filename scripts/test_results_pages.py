"""main-job.md, generators.md and labeler.md are generated from committed files: one number
edited in a generated table of each makes `results.py --check` fail
(python3 -m unittest scripts/test_results_pages.py)."""

import json
import re
import shutil
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import results  # noqa: E402

# (page, block): each holds a generated table.
TABLES = [
    ("main-job.md", "findings-summary"),
    ("main-job.md", "judge-summary"),
    ("generators.md", "models"),
    ("generators.md", "settings"),
    ("generators.md", "speed"),
    ("labeler.md", "iu-validate"),
    ("labeler.md", "conventions"),
]
NUMBER = re.compile(r"\d+\.\d+")


class PagesFromData(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        results.load_modules()

    def edited(self, page: str, block: str) -> str:
        """`page` with the first decimal figure of the first table row inside `block` changed by
        one in its last digit."""
        on_disk = results.page_path(page).read_text()
        begin = f"<!-- results:{block}:begin -->"
        start, end = on_disk.index(begin) + len(begin), on_disk.index(f"<!-- results:{block}:end -->")
        pos = start
        for line in on_disk[start:end].splitlines(keepends=True):
            if line.startswith("| ") and not line.startswith("|---"):
                m = NUMBER.search(line)
                if m:
                    at = pos + m.end() - 1
                    return on_disk[:at] + str((int(on_disk[at]) + 1) % 10) + on_disk[at + 1:]
            pos += len(line)
        self.fail(f"{page}: block {block} has no table row with a decimal figure")

    def check(self, page: str, text: str) -> tuple[int, str]:
        """What `scripts/results.py --check` says of the page if it read `text` (exit status,
        stderr); the page's data are the committed files."""
        return results.check_text(page, text)

    def test_blocks_are_registered(self):
        for key in TABLES:
            self.assertIn(key, results.BLOCKS, key)

    def test_committed_pages_pass(self):
        for page in sorted({p for p, _ in TABLES}):
            rc, err = self.check(page, results.page_path(page).read_text())
            self.assertEqual(rc, 0, err)

    def test_one_edited_table_number_fails_check(self):
        for page, block in TABLES:
            with self.subTest(page=page, block=block):
                rc, err = self.check(page, self.edited(page, block))
                self.assertEqual(rc, 1, err)
                self.assertIn(page, err)

    def test_labeler_counts_must_give_the_recorded_scores(self):
        """A hand-edited count in iu_validation.json no longer gives the F1 the file records."""
        make = results.BLOCKS[("labeler.md", "iu-validate")]
        env = make.__globals__
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / env["SRC"]
            src.parent.mkdir(parents=True)
            shutil.copy(env["ROOT"] / env["SRC"], src)
            d = json.loads(src.read_text())
            d["uncertain_absent"]["report"]["per_observation"][1]["tp"] += 1
            src.write_text(json.dumps(d))
            saved = env["ROOT"]
            env["ROOT"] = Path(tmp)
            try:
                with self.assertRaises(SystemExit):
                    make()
            finally:
                env["ROOT"] = saved


if __name__ == "__main__":
    unittest.main()
