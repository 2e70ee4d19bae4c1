"""Reading and writing where a sandbox can write: regular files only, never through a link,
never more than a bound.

    text = untrusted.read_text(Path(report_dir) / "rank0.json", REPORT_BYTES)
    untrusted.write_fresh(Path(workdir) / "ring_student.py", source)
    why = untrusted.tree_problem(folder, max_bytes=2**26, max_files=1_000)  # None: fine

A sandboxed process (a rank, a grader's kernel, a student's function server) can leave, where
the trusted side reads after it, a symbolic link (to a solution, to /dev/zero, to the
grader's own stdout), a FIFO (an open or a read that never returns), a device, or a file
larger than the memory that reads it. `read_bytes` refuses each of them, saying which
(UntrustedFile): lstat says a regular file, open with O_NOFOLLOW | O_NONBLOCK, fstat says the
same file, and at most `limit` bytes are read. Only the last component of a path is held to
this: the folders on the way must be the trusted side's own (a sandbox's writable folder is
bound at its mount point, which the sandbox cannot replace). Used by the launcher (rank
reports and records), the run cache, and grading (submissions, the clean run's files).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
KINDS = {
    stat.S_IFLNK: "a symbolic link",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a folder",
}


class UntrustedFile(OSError):
    """A path the trusted side will not read or write: not a regular file, or too large."""


def kind(mode: int) -> str:
    """What a file of st_mode `mode` is, in words ("a symbolic link", "a FIFO", ...)."""
    return KINDS.get(stat.S_IFMT(mode), "a special file")


def open_regular(path) -> int:
    """A file descriptor of `path` for reading, if it is a regular file itself (no link
    followed, no FIFO opened for good, no device opened at all); else UntrustedFile."""
    before = os.lstat(path)
    if not stat.S_ISREG(before.st_mode):
        raise UntrustedFile(f"{path}: {kind(before.st_mode)}, not a regular file")
    try:
        fd = os.open(path, READ_FLAGS)
    except OSError as exc:  # ELOOP: replaced by a link since the lstat
        raise UntrustedFile(
            f"{path}: replaced while being opened ({exc.strerror})"
        ) from None
    now = os.fstat(fd)
    if (now.st_dev, now.st_ino) != (before.st_dev, before.st_ino) or not stat.S_ISREG(
        now.st_mode
    ):
        os.close(fd)
        raise UntrustedFile(f"{path}: replaced while being opened")
    return fd


def read_bytes(path, limit: int) -> bytes:
    """The bytes of regular file `path`, at most `limit` of them (UntrustedFile if it holds
    more, or is not a regular file: see open_regular)."""
    fd = open_regular(path)
    try:
        if os.fstat(fd).st_size > limit:
            raise UntrustedFile(f"{path}: larger than {limit:,} bytes")
        chunks, size = [], 0
        while chunk := os.read(fd, min(1 << 20, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:  # it grew since the fstat
                raise UntrustedFile(f"{path}: larger than {limit:,} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path, limit: int) -> str:
    """read_bytes, decoded as UTF-8 (UnicodeDecodeError, a ValueError, if it is not)."""
    return read_bytes(path, limit).decode()


def read_json(path, limit: int):
    """read_bytes, parsed as JSON (ValueError if it is not)."""
    return json.loads(read_bytes(path, limit))


def write_fresh(path, text: str) -> None:
    """Write `text` to `path` as a new file: whatever was there (a link planted by a sandbox
    included) is removed first, never written through; UntrustedFile if something takes its
    place meanwhile."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except IsADirectoryError:
        raise UntrustedFile(f"{path}: a folder, not a file to write") from None
    try:
        fd = os.open(path, WRITE_FLAGS, 0o644)
    except FileExistsError:
        raise UntrustedFile(f"{path}: replaced while being written") from None
    with os.fdopen(fd, "w") as f:
        f.write(text)


def tree_problem(folder, max_bytes: int, max_files: int) -> str | None:
    """None if `folder` is a folder (not a link to one) holding only folders and regular
    files, at most `max_files` of them and `max_bytes` in all (lstat only: nothing is
    opened); else what is wrong, naming the path from the folder's name on."""
    top, name = os.lstat(folder), Path(folder).name
    if not stat.S_ISDIR(top.st_mode):
        return f"{name} is {kind(top.st_mode)}, not a folder"
    files, size, todo = 0, 0, [Path(folder)]
    while todo:
        with os.scandir(todo.pop()) as entries:
            for entry in entries:
                found = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(found.st_mode):
                    todo.append(Path(entry.path))
                    continue
                if not stat.S_ISREG(found.st_mode):
                    where = os.path.join(name, os.path.relpath(entry.path, folder))
                    return f"{where} is {kind(found.st_mode)}"
                files, size = files + 1, size + found.st_size
                if files > max_files:
                    return f"{name} holds more than {max_files:,} files"
                if size > max_bytes:
                    return f"{name} holds more than {max_bytes:,} bytes"
    return None


def copy_tree(source, dest) -> None:
    """Copy the folders and regular files of `source` into new folder `dest`, following no
    link (UntrustedFile for anything else: check the tree first with tree_problem)."""
    os.mkdir(dest)
    with os.scandir(source) as entries:
        for entry in entries:
            mode = entry.stat(follow_symlinks=False).st_mode
            target = os.path.join(dest, entry.name)
            if stat.S_ISDIR(mode):
                copy_tree(entry.path, target)
                continue
            fd = open_regular(entry.path)
            with os.fdopen(fd, "rb") as src, open(target, "xb") as out:
                while chunk := src.read(1 << 20):
                    out.write(chunk)
