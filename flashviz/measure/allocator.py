"""A steady C allocator while timing on the CPU: the one state every repeat of every run measures in.

PyTorch's CPU tensors come from the C library's malloc. glibc serves a large block (over its mmap threshold) with a
fresh mmap, whose pages the kernel zeroes and faults in on first touch, and it hands the top of its heap back to the
system once more than its trim threshold is free there. Both thresholds move by themselves as the process frees
memory, so the same call of standard attention at N = 1024, H = 4 (S and P are 16 MiB each) took either about 5.5 ms
or about 13 ms, switching from call to call and from run to run of the same process: a verdict between naive
attention and FA1 there reversed on a rerun. A GPU does not see this: PyTorch's CUDA caching allocator keeps freed
blocks for the next call.

`steady_allocator()` pins the two thresholds while a timing runs, through glibc's public `mallopt`:
    M_MMAP_THRESHOLD  32 MiB (the largest value glibc's own adjustment reaches on a 64-bit machine): a block up to
                      32 MiB comes from the heap and is reused; a larger one is mmapped on every call, every time.
    M_TRIM_THRESHOLD  1 GiB: freed heap memory stays with the process for the next repeat.
and afterwards sets the trim threshold back to twice the mmap threshold (glibc's own rule) and trims the heap, so the
process returns what the timing freed. The mmap threshold stays at 32 MiB: once set, glibc no longer moves it, and
has no call that would give the moving one back. Measured on the machine this was written on (2 threads, 15 calls
after a settle, each in a fresh process): naive attention at N = 1024, H = 4, d = 64 had medians of 4.8-5.3 ms in four
processes inside steady_allocator(), against medians of 12-45 ms (calls of 5.4 to 78 ms) in six without it.

Elsewhere (macOS, musl, Windows) there is no `mallopt`, and `steady_allocator()` changes nothing; `allocator()` says
which case a run measured in, for its CSV.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
from collections.abc import Iterator

MIB = 1 << 20
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's <malloc.h> parameter numbers
MMAP_THRESHOLD = 32 * MIB  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on a 64-bit machine
TRIM_THRESHOLD = 1024 * MIB  # while timing: keep freed heap memory for the next repeat
TRIM_AFTER = 2 * MMAP_THRESHOLD  # after timing: glibc's own rule (it sets trim to twice the mmap threshold)
_LOCK = threading.Lock()
_depth = 0  # nested steady_allocator blocks (a sweep inside a timing): the outermost one restores


def _glibc() -> ctypes.CDLL | None:
    """The running C library when it is glibc (it has mallopt and malloc_trim), else None."""
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version.restype = ctypes.c_char_p
        libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
        libc.malloc_trim.argtypes = (ctypes.c_size_t,)
        return libc
    except (OSError, AttributeError):
        return None


LIBC = _glibc()


def allocator() -> str:
    """Which allocator state a timing in this process runs in, for a CSV's context column.

    Example:
        >>> allocator().startswith(("glibc", "system"))
        True
    """
    if LIBC is None:
        return "system malloc (thresholds not pinned)"
    version = LIBC.gnu_get_libc_version().decode()
    return f"glibc {version}, mmap threshold {MMAP_THRESHOLD // MIB} MiB, trim threshold {TRIM_THRESHOLD // MIB} MiB"


@contextlib.contextmanager
def steady_allocator() -> Iterator[bool]:
    """Pin glibc's mmap and trim thresholds for the block (see the module's docstring); afterwards set the trim
    threshold to TRIM_AFTER and give freed memory back. Nested blocks pin once and restore once.

    Yields:
        True when the thresholds are pinned (glibc), False where nothing could be changed.

    Example:
        >>> with steady_allocator() as pinned:
        ...     pinned == (LIBC is not None)
        True
    """
    global _depth
    if LIBC is None:
        yield False
        return
    with _LOCK:
        if _depth == 0:
            LIBC.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
            LIBC.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
        _depth += 1
    try:
        yield True
    finally:
        with _LOCK:
            _depth -= 1
            if _depth == 0:
                LIBC.mallopt(M_TRIM_THRESHOLD, TRIM_AFTER)
                LIBC.malloc_trim(0)
