"""Lab 1: a byte counter that guesses 16 bytes per parameter instead of counting storages."""


def count_state_bytes(params, grads, optimizer_states):
    numel = sum(p.numel() for p in params)
    return {"params": 4 * numel, "grads": 4 * numel, "optimizer": 8 * numel}
