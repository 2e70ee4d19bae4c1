"""Reports which of the notebook side's modules a rank has loaded (it should load none)."""

import sys

import zerobook as zb

me = zb.setup(verbose=False)
zb.report(
    loaded=sorted(
        m
        for m in (
            "zerobook.launcher.launch",
            "zerobook.launcher.zygote",
            "zerobook.figures",
            "zerobook.figures.style",
            "zerobook.figures.widgets",
            "zerobook.grading",
            "matplotlib",
        )
        if m in sys.modules
    )
)
