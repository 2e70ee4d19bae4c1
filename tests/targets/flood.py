"""A rank script that prints a very long line and then far more lines than anyone should read."""

import sys

print("x" * 50_000, flush=True)
for i in range(200_000):
    print(f"line {i}")
print("the end", flush=True)
sys.stdout.flush()
