# attack_11: structural pattern matching reads attributes by NAME: in `case object(__globals__=g)`
# the attribute is a string of the MatchClass node and `g` a MatchAs name: neither is an
# ast.Name or ast.Attribute, so no rule reads them, and no guarded getattr runs. No library needed.
# (MatchAs also binds any dunder global: `case __builtins__:`; so do `except E as __x__` and
# `import m as __x__`.) Lab: any.
import torch

match torch.nn.functional.relu:
    case object(__globals__=G):
        pass
match G["torch"]:  # the real torch module
    case object(__dict__=T):
        pass
LEAK_sys = T["sys"]
LEAK_os = T["os"]
match LEAK_sys:
    case object(modules=M, _getframe=getframe):
        pass
LEAK_builtins = M["builtins"]
LEAK_frame = getframe()
match LEAK_frame:
    case object(f_back=back, f_globals=globs):
        pass
LEAK_grader_frame = back
match ():
    case object(__class__=object(__base__=object(__subclasses__=subclasses))):
        pass
LEAK_subclasses = subclasses()[:3]
