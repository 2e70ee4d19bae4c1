"""accounting: the course's arithmetic of memory and traffic, every formula the chapters check
against a measurement. Pure (no torch): used by the notebooks, the labs, the ranks and the tests.

    memory               model states per rank for each ZeRO stage (the paper's 16 bytes a
                         parameter, divided by N as each stage shards), the largest model that
                         fits, the fewest GPUs; `python -m zerobook.accounting.memory` prints the table
    recipes              the precision recipes in circulation (ZeRO paper, Playbook, Bekman,
                         scaling-book): bytes per parameter of weights, gradients, optimizer state
    activations          what a transformer layer keeps for backward (Korthikanti et al.), and
                         the GPT parameter count
    deepspeed_estimates  DeepSpeed's own ZeRO-2 and ZeRO-3 estimators, to the integer
    traffic              what a ring, a parameter server and each ZeRO stage send; nccl-tests'
                         bus bandwidth; the alpha-beta fit
    zero_paper           the ZeRO paper's Tables 1 and 2, as printed
    hardware             accelerator and cluster facts (datasheets, NCCL's reachable rates), sourced

Old names still work (zerobook/_moved.py): zerobook.memory is memory (the names that went to
recipes, activations, deepspeed_estimates and traffic found through it), zerobook.traffic,
zerobook.zero_paper and zerobook.hardware are traffic, zero_paper and hardware.
"""

from zerobook._lazy import submodules

__getattr__, __dir__ = submodules(__name__, __path__)
