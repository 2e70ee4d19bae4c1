"""The capstone's text (zerobook.train.text): the standard library's files by a fixed rule, a split by
a hash of each path, a deterministic sampler, and the n-gram baselines. Another Python ships
other files, so these tests assert relations, not sizes."""

import math

import pytest
import torch

from zerobook.train import text


@pytest.fixture(scope="module")
def splits():
    return text.load()


def test_the_rule_leaves_out_tests_tables_and_other_platforms():
    files = text.stdlib_files()
    assert "os.py" in files and "json/decoder.py" in files
    for path in files:
        parts = path.split("/")
        assert not text.LEFT_OUT_DIRS & set(parts[:-1]), path
        assert not parts[-1].startswith(text.ONE_PLATFORM), path
    # about 10% held out: within 4 standard deviations of the binomial's mean
    p, n = text.HELD_OUT_BELOW / 256, len(files)
    assert abs(sum(map(text.held_out, files)) - p * n) < 4 * math.sqrt(n * p * (1 - p))


def test_the_split_depends_on_each_path_alone(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "t.py").write_text("left out\n")
    assert text.stdlib_files(tmp_path) == ["a.py"]
    before = {p: text.held_out(p) for p in text.stdlib_files()}
    assert all(text.held_out(p) == held for p, held in before.items())


def test_each_rank_gets_its_slice_of_the_same_global_batch(splits):
    train, _ = splits
    whole = text.batch(train, step=5, global_batch=6, seq_len=32)
    ranks = [
        text.batch(train, step=5, global_batch=6, seq_len=32, rank=r, world_size=3)
        for r in range(3)
    ]
    assert torch.equal(torch.cat(ranks), whole) and whole.shape == (6, 33)
    assert not torch.equal(text.batch(train, step=6, global_batch=6, seq_len=32), whole)
    with pytest.raises(ValueError, match="multiple of world size"):
        text.batch(train, step=0, global_batch=4, seq_len=8, world_size=3)


def test_longer_contexts_predict_held_out_text_better(splits):
    train, held_out = splits
    bits = [text.ngram_bits_per_byte(train, held_out, n) for n in (1, 2)]
    assert 8 > bits[0] > bits[1] > 0  # below 8 bits: not every byte is equally likely


def test_add_one_smoothing_gives_a_distribution_for_every_context():
    train = torch.tensor([1, 2, 1, 2, 3], dtype=torch.uint8)
    every_pair = torch.arange(256, dtype=torch.uint8)
    # the bits of each next byte after context 1, under the bigram: they must sum to probability 1
    total = sum(
        2
        ** -(
            text.ngram_bits_per_byte(train, torch.tensor([1, b], dtype=torch.uint8), 2)
        )
        for b in every_pair.tolist()
    )
    assert total == pytest.approx(1.0, abs=1e-9)
