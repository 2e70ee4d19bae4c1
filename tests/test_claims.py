"""Claims the book corrected against their sources (issue 68), held: each test reads the page's
prose and fails on the claim as it stood. What a source says is quoted in the page itself."""

import json

from conftest import ROOT


def prose(chapter: str) -> str:
    """A chapter's Markdown, its lines joined by spaces."""
    cells = json.loads((ROOT / "chapters" / f"{chapter}.ipynb").read_text())["cells"]
    text = "\n".join(
        "".join(c["source"]) for c in cells if c["cell_type"] == "markdown"
    )
    return " ".join(text.split())


def test_deepspeeds_coalesced_quantized_gather_pays_both_latencies_too():
    """DeepSpeed's coalesced quantized gather issues two all-gathers (codes: `handle`,
    scales: `quant_handle`), so coalescing does not save the second latency."""
    text = prose("zeropp")
    assert "coalesced gathers carry several parameters per call" not in text
    assert "issues two all-gathers too" in text and "`quant_handle`" in text


def test_torchtitans_embedding_count_is_the_published_runs_not_todays():
    """torchtitan counted 6N with the embedding in at the commit that published 2,904
    tokens/s and 56.8% (1ea476e9f, April 2024); today's leaves the embedding out."""
    text = prose("appendix_perfmodel")
    assert "torchtitan counts $6N$ with the embedding in" not in text
    assert (
        "commit `1ea476e9f`" in text
        and "Today's torchtitan leaves the embedding out" in text
    )


def test_the_cpu_adam_rate_is_said_as_measured():
    """The saved rates move from 333 to 145-181 million elements a second with every rank
    stepping: the page gives the numbers, not 'hardly moves'."""
    text = prose("offload")
    assert "hardly moves" not in text
    assert (
        "{glue:text}`off_small_rate`" in text and "{glue:text}`off_sizes_range`" in text
    )
