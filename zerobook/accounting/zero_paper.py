"""The ZeRO paper's printed figures (Rajbhandari et al., SC20, arXiv:1910.02054), as printed.

Transcribed verbatim, as strings, so that the book can show them and assert that
`zerobook.accounting.memory` agrees to the paper's printed precision. GB there are 10**9 bytes.
"""

from __future__ import annotations

# Table 1: per-device model-state memory (GB) of P_os, P_os+g, P_os+g+p vs the DP degree.
# "Without ZeRO, the memory consumption is equal to the first row in the table."
TABLE_1_MODELS = {"7.5B": 7.5e9, "128B": 128e9, "1T": 1e12}
TABLE_1 = {
    "7.5B": {
        1: ("120", "120", "120"),
        4: ("52.5", "41.3", "30"),
        16: ("35.6", "21.6", "7.5"),
        64: ("31.4", "16.6", "1.88"),
        256: ("30.4", "15.4", "0.47"),
        1024: ("30.1", "15.1", "0.12"),
    },
    "128B": {
        1: ("2048", "2048", "2048"),
        4: ("896", "704", "512"),
        16: ("608", "368", "128"),
        64: ("536", "284", "32"),
        256: ("518", "263", "8"),
        1024: ("513", "257", "2"),
    },
    "1T": {
        1: ("16000", "16000", "16000"),
        4: ("7000", "5500", "4000"),
        16: ("4750", "2875", "1000"),
        64: ("4187", "2218", "250"),
        256: ("4046", "2054", "62.5"),
        1024: ("4011", "2013", "15.6"),
    },
}
TABLE_1_DEVICE_GB = (
    32  # "fit into a cluster of 32GB V100 GPUs" (the caption's bold cells)
)

# Table 2: maximum theoretical model size (Baseline, P_os, P_os+g, P_os+g+p) for a model-parallel
# degree MP on a number of GPUs (so N_d = GPUs / MP), and the sizes measured with ZeRO-OS.
TABLE_2 = [  # (MP, GPUs, theoretical x 4, measured baseline, measured P_os)
    (1, 64, ("2B", "7.6B", "14.4B", "128B"), "1.3B", "6.2B"),
    (2, 128, ("4B", "15.2B", "28.8B", "256B"), "2.5B", "12.5B"),
    (4, 256, ("8B", "30.4B", "57.6B", "0.5T"), "5B", "25B"),
    (8, 512, ("16B", "60.8B", "115.2B", "1T"), "10B", "50B"),
    (16, 1024, ("32B", "121.6B", "230.4B", "2T"), "20B", "100B"),
]

# Section 5's worked example (also Figure 1): Ψ = 7.5B, N_d = 64, K = 12.
FIGURE_1 = {
    "psi": 7.5e9,
    "world_size": 64,
    "printed_gb": ("120", "31.4", "16.6", "1.9"),
}

UNITS = {"B": 1e9, "T": 1e12}


def value(printed: str) -> float:
    """'7.6B' -> 7.6e9 parameters, '0.5T' -> 5e11; a bare number stays as it is."""
    scale = UNITS.get(printed[-1], 1.0)
    return float(printed.rstrip("BT")) * scale


def last_digit(printed: str) -> float:
    """One unit of the last printed digit, in the same units as `value`: '35.6' -> 0.1."""
    digits = printed.rstrip("BT")
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    return 10.0**-decimals * UNITS.get(printed[-1], 1.0)


def agrees(computed: float, printed: str) -> bool:
    """Within one unit of the last printed digit (the paper rounds some cells, truncates others)."""
    return abs(computed - value(printed)) < last_digit(printed)
