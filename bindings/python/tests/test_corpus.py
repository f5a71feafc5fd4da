"""sdr_rewards.build_corpus / sdr_rewards.merge_corpus: shards merged equal one build (and the CLI's)."""

import json
import struct
import subprocess

import pytest

import sdr_rewards

ROWS = [
    ("2", "Heart size normal. Lungs are clear.", "No acute disease."),
    ("3", "Large left pleural effusion. Heart size normal.", "Left effusion."),
    ("4", "Lungs are clear.", "No acute disease."),
    ("5", "Mild cardiomegaly. No pneumothorax.", "Cardiomegaly."),
    ("6", "", "Stable granuloma."),
    ("7", "Degenerative changes of the spine.", "No acute disease."),
    ("8", "Heart size normal. Mild cardiomegaly.", ""),
]


@pytest.fixture()
def csv(tmp_path):
    p = tmp_path / "r.csv"
    lines = ["uid,findings,impression"] + [f'{u},"{f}","{i}"' for u, f, i in ROWS]
    p.write_text("\n".join(lines) + "\n")
    return p


def header(path):
    """The safetensors header metadata (content_sha256 covers every tensor's bytes)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n))["__metadata__"]


def test_shards_merged_equal_single_build(csv, tmp_path, sdr_bin):
    single = tmp_path / "single.safetensors"
    info = sdr_rewards.build_corpus(csv, single, "csv", encoder="hash-16")
    assert info["n_reports"] == len(ROWS) and info["shard"] is None
    parts = []
    for i in (2, 0, 1):
        p = tmp_path / f"part-{i}.safetensors"
        got = sdr_rewards.build_corpus(csv, p, "csv", shard=(i, 3), encoder="hash-16")
        assert got["shard"]["index"] == i and got["shard"]["total"] == len(ROWS)
        parts.append(p)
    merged = tmp_path / "merged.safetensors"
    assert sdr_rewards.merge_corpus(parts, merged)["n_reports"] == len(ROWS)
    assert header(merged) == header(single)
    assert "shard_index" not in header(merged) and header(parts[0])["shard_index"] == "2"
    # The same as the CLI's single build.
    cli = tmp_path / "cli.safetensors"
    subprocess.run(
        [sdr_bin, "corpus", "build", "--input", str(csv), "--format", "csv",
         "--encoder", "hash-16", "--quiet", "--out", str(cli)],
        check=True,
    )
    assert header(cli) == header(merged)


def test_merge_refusals_name_the_file(csv, tmp_path):
    parts = [tmp_path / f"part-{i}.safetensors" for i in range(3)]
    for i, p in enumerate(parts):
        sdr_rewards.build_corpus(csv, p, "csv", shard=(i, 3), encoder="hash-16")
    with pytest.raises(ValueError, match="shards 1/3 missing"):
        sdr_rewards.merge_corpus([parts[0], parts[2]], tmp_path / "m.safetensors")
    with pytest.raises(ValueError, match="given twice"):
        sdr_rewards.merge_corpus([parts[0], parts[1], parts[1], parts[2]], tmp_path / "m.safetensors")
    other = tmp_path / "other.safetensors"
    sdr_rewards.build_corpus(csv, other, "csv", shard=(2, 3), encoder="hash-8")
    with pytest.raises(ValueError, match="other.safetensors.*encoder"):
        sdr_rewards.merge_corpus([parts[0], parts[1], other], tmp_path / "m.safetensors")
    assert not (tmp_path / "m.safetensors").exists()
    with pytest.raises(ValueError, match="shard"):
        sdr_rewards.build_corpus(csv, tmp_path / "x.safetensors", "csv", shard=(3, 3), encoder="hash-16")
    with pytest.raises(FileNotFoundError):
        sdr_rewards.build_corpus(tmp_path / "nope.csv", tmp_path / "x.safetensors", "csv", encoder="hash-16")
