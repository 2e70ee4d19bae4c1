"""make test's notebook kernels forked from a zygote that has imported what a chapter's kernel
imports (tests/kernel_preload.py): each is still what `python -m ipykernel_launcher` starts, as
jupyter_client and the notebook see it (its own session, the notebook's folder, the inline
figures, an interrupt, a stop that leaves nothing)."""

import json
import os
import socket
import sys
import time

import nbval.kernel
import psutil
import pytest
from jupyter_client.manager import start_new_kernel
from jupyter_client.provisioning import local_provisioner

import kernel_preload
from conftest import ROOT

pytestmark = [
    pytest.mark.launch,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's zygote"),
]

ZYGOTE = 2  # a rank's ancestors: its watcher, its agent, the zygote, the launcher
LOOK = """
import json, os, sys
from IPython import get_ipython
import matplotlib.pyplot as plt
plt.plot([1, 2])
callbacks = get_ipython().events.callbacks["post_execute"]
print(json.dumps({"pid": os.getpid(), "ppid": os.getppid(), "pgid": os.getpgid(0),
    "cwd": os.getcwd(), "argv": sys.argv, "backend": plt.get_backend(),
    "post_execute": [getattr(f, "__name__", "") for f in callbacks]}))
"""


@pytest.fixture
def preloaded(monkeypatch):
    """The plugin's patches, with a zygote of this test's own (closed at its end)."""
    state = {"zygote": None, "factory": None, "env": None, "nbval": False, "forked": 0}
    monkeypatch.setattr(kernel_preload, "_state", state)
    monkeypatch.setattr(
        local_provisioner, "launch_kernel", kernel_preload.launch_kernel
    )
    monkeypatch.setattr(
        nbval.kernel, "start_new_kernel", kernel_preload.start_new_kernel
    )
    yield state
    for name in ("zygote", "factory"):
        if state[name] is not None:
            state[name].close()


def run(kernel, code: str, timeout: float = 60) -> list[dict]:
    """The cell's outputs (stream text, display data, error names) as the notebook gets them."""
    msg_id = kernel.execute_cell_input(code, allow_stdin=False)
    outputs = []
    while True:
        msg = kernel.get_message(stream="iopub", timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "status" and content["execution_state"] == "idle":
            return outputs
        if kind in ("stream", "display_data", "execute_result", "error"):
            outputs.append({"kind": kind, **content})


def nbval_kernel(cwd) -> nbval.kernel.RunningKernel:
    return nbval.kernel.RunningKernel(
        nbval.kernel.CURRENT_ENV_KERNEL_NAME, cwd=str(cwd)
    )


def test_nbvals_kernel_is_forked_and_is_what_the_command_starts(
    preloaded, tmp_path, monkeypatch
):
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "first.ipynb::Cell 0 (setup)")
    kernel = nbval_kernel(tmp_path)
    try:
        provisioner = kernel.km.provisioner
        # its own session from the moment jupyter_client learns its pid: the group it
        # signals is the kernel's alone, never the zygote's
        assert provisioner.pgid == provisioner.pid != preloaded["zygote"].proc.pid
        outputs = run(kernel, LOOK)
        seen = json.loads(next(o["text"] for o in outputs if o["kind"] == "stream"))
        assert preloaded["forked"] == 1
        assert seen["ppid"] == preloaded["zygote"].proc.pid
        assert seen["pid"] == seen["pgid"] == provisioner.pid
        assert seen["cwd"] == str(tmp_path)
        assert seen["argv"][0].endswith("ipykernel_launcher.py")
        assert seen["backend"] == "module://matplotlib_inline.backend_inline"
        # the figure reaches the notebook as an inline picture (the backend's hook is the
        # kernel's, registered when the notebook first plots, not in the zygote)
        assert "flush_figures" in seen["post_execute"]
        assert any("image/png" in o.get("data", {}) for o in outputs), outputs

        kernel.execute_cell_input("import time; time.sleep(60)", allow_stdin=False)
        time.sleep(1)
        began = time.monotonic()
        kernel.interrupt()
        errors = run(kernel, "print('after')")
        assert time.monotonic() - began < 20
        assert any(o.get("text") == "after\n" for o in errors)
    finally:
        kernel.stop()
    deadline = time.monotonic() + 10
    while psutil.pid_exists(seen["pid"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not psutil.pid_exists(seen["pid"])
    # the next notebook's kernel (pytest's PYTEST_CURRENT_TEST names another test) is forked
    # from the same zygote
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "second.ipynb::Cell 0 (setup)")
    kernel = nbval_kernel(tmp_path)
    try:
        pid = kernel.km.provisioner.pid
        assert psutil.Process(pid).ppid() == preloaded["zygote"].proc.pid
        assert preloaded["forked"] == 2
    finally:
        kernel.stop()


LAUNCH = """
import json
import zerobook as zb
from zerobook.launcher import zygote
first = zb.torchrun(TARGET, nproc=2, echo=False).ranks[0]
other = zb.torchrun(TARGET, nproc=2, echo=False, env={"ATEN_CPU_CAPABILITY": "default"})
zygotes = {z.proc.pid: type(z.proc).__name__ for z in zygote._ZYGOTES.values()}
print(json.dumps({"first": first, "other": other.ranks[0], "zygotes": zygotes}))
"""


def test_a_kernels_first_launch_adopts_the_zygote_it_was_handed(preloaded, tmp_path):
    """The zygote handed to the kernel (forked by the factory, not by the kernel) serves its
    launches: torch imported, nothing of the kernel's loaded, faulthandler on as the ranks'
    environment asks; a launch whose environment torch reads otherwise gets its own."""
    kernel = nbval_kernel(tmp_path)
    try:
        code = f"TARGET = {str(ROOT / 'tests/targets/rank_origin.py')!r}\n" + LAUNCH
        outputs = run(kernel, code, timeout=120)
        text = "".join(o.get("text", "") for o in outputs if o["kind"] == "stream")
        assert text, outputs
        seen = json.loads(text.splitlines()[-1])
        kernel_pid = kernel.km.provisioner.pid
    finally:
        kernel.stop()
    handed = seen["first"]["ancestors"][ZYGOTE]
    assert seen["zygotes"][str(handed)] == "Elsewhere"
    assert preloaded["factory"].proc.pid != kernel_pid
    rank = seen["first"]
    assert rank["torch_preloaded"] and rank["dynamo_preloaded"] and rank["faulthandler"]
    assert rank["kernel_side_loaded"] == []
    assert rank["method_name_from"] == "zerobook.launcher.agent"
    own = seen["other"]["ancestors"][ZYGOTE]
    assert own != handed and seen["zygotes"][str(own)] == "Popen"
    assert seen["other"]["ancestors"][ZYGOTE + 1] == kernel_pid  # the kernel started it


def test_a_kernel_started_outside_nbval_is_started_as_the_command(preloaded):
    """Only nbval's notebook kernels are forked: tests that start a kernel of their own (a
    notebook killed outright, say) get the process jupyter_client starts."""
    manager, client = start_new_kernel(kernel_name="python3")
    try:
        assert manager.provisioner.process.pid in {
            p.pid for p in psutil.Process().children()
        }
        assert preloaded["zygote"] is None
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def test_switched_off_the_plugin_patches_nothing(monkeypatch):
    """ZEROBOOK_KERNEL_PRELOAD=0: each kernel is started as jupyter_client starts it."""
    unpatched = object()
    monkeypatch.setattr(local_provisioner, "launch_kernel", unpatched)
    monkeypatch.setattr(nbval.kernel, "start_new_kernel", unpatched)
    monkeypatch.setenv(kernel_preload.OFF_ENV, "0")
    kernel_preload.pytest_configure(None)
    assert local_provisioner.launch_kernel is nbval.kernel.start_new_kernel is unpatched


def test_a_kernel_waits_for_the_factory_a_bounded_time(monkeypatch):
    """A factory still importing torch (on CI's 2 cores, beside every other worker's first
    kernel) has a kernel wait FACTORY_WAIT_S, not past nbval's start-up timeout: then the kernel
    starts without a zygote handed to it, and its first launch starts its own."""
    import kernel_preload_main
    from zerobook.launcher import zygote

    address = f"zerobook-test-silent-factory-{os.urandom(4).hex()}"
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    silent.bind("\0" + address)
    silent.listen()  # accepts (the kernel's connect succeeds) and never answers
    monkeypatch.setitem(kernel_preload_main._factory, "address", address)
    monkeypatch.setattr(kernel_preload_main, "FACTORY_WAIT_S", 0.5)
    first = zygote._zygote_for
    try:
        started = time.monotonic()
        kernel_preload_main._hand_a_zygote()
        waited = time.monotonic() - started
    finally:
        silent.close()
    assert 0.5 <= waited < 10
    assert zygote._zygote_for is first  # nothing to adopt: the launcher's own zygote
