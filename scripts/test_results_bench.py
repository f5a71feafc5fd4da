"""The benchmarks' figures in README.md and bench/README.md are rendered from bench/results-*.json
(scripts/pages/bench.py): an edited figure fails `scripts/results.py --check`."""

import re
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import results  # noqa: E402


class BenchBlocks(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        results.load_modules()

    def check(self, name: str, text: str) -> tuple[int, str]:
        """What `scripts/results.py --check` says of the page if it read `text` (exit status,
        stderr); the page's data are the committed files."""
        return results.check_text(name, text)

    def edited(self, name: str, block: str) -> str:
        text = (results.ROOT / name).read_text()
        begin = f"<!-- results:{block}:begin -->"
        start = text.index(begin) + len(begin)
        m = re.compile(r"\d+\.\d+").search(text, start, text.index(f"<!-- results:{block}:end -->"))
        self.assertIsNotNone(m, block)
        return text[: m.end() - 1] + str((int(m.group()[-1]) + 1) % 10) + text[m.end():]

    def test_an_edited_figure_fails(self):
        for name in ("README.md", "bench/README.md"):
            rc, err = self.check(name, (results.ROOT / name).read_text())
            self.assertEqual((rc, err), (0, ""), name)
        for name, block in (("README.md", "cost-table"), ("README.md", "encoder-speed"),
                            ("README.md", "worker-memory"), ("README.md", "rewards-speed"),
                            ("bench/README.md", "per-sample"), ("bench/README.md", "encoder-profile")):
            rc, err = self.check(name, self.edited(name, block))
            self.assertEqual(rc, 1, f"an edit in {name} block {block} passed --check")
            self.assertIn("differs", err)


if __name__ == "__main__":
    unittest.main()
