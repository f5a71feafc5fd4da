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
            on_disk = (results.RESULTS / name).read_text()
            self.assertEqual(on_disk, results.expected(name, on_disk), name)

    def test_one_edited_number_fails(self):
        for name in results.page_names():
            on_disk = (results.RESULTS / name).read_text()
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
            on_disk = (results.RESULTS / name).read_text()
            begin = f"<!-- results:{block}:begin -->"
            start = on_disk.index(begin) + len(begin)
            end = on_disk.index(f"<!-- results:{block}:end -->")
            m = re.compile(r"\d").search(on_disk, start, end)
            self.assertIsNotNone(m, f"{name}: block {block} has no number")
            edited = on_disk[: m.start()] + str((int(m.group()) + 1) % 10) + on_disk[m.end():]
            self.assertNotEqual(edited, results.expected(name, edited), f"{name}: an edit in block {block} passed")


if __name__ == "__main__":
    unittest.main()
