# attack_10: torch global state the grader measures with, through names DENIED does not list
# (its own purpose: "changes torch for the grader"), unseen by zerobook.labs.untouched.
import torch

torch.set_grad_enabled(False)  # the harness's backward()s now fail / no grads
torch.manual_seed(0)  # same effect as the denied set_rng_state
torch.autograd.set_detect_anomaly(
    True
)  # the denied set_anomaly_enabled, by another name
torch.set_autocast_cpu_dtype(
    torch.float16
)  # autocast regions of the grader change dtype
torch.set_autocast_enabled("cpu", True)
torch.set_printoptions(precision=0)
LEAK_ok = True
