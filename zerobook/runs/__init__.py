"""The experiments that chapters, tests and benchmarks launch with `zb.torchrun`, one script each.

Each opens with the command that runs it, sets up with `zb.setup()`, and sends its results back
with `zb.report(...)`. They import library modules, never each other and never a lab harness.
"""
