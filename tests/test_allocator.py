"""``tlsite build`` keeps glibc from serving big strings out of its heap after the first."""

from __future__ import annotations

import ctypes
import ctypes.util
import subprocess
import sys

import pytest

from tlsite.core.allocator import BIG_BLOCK_BYTES, return_big_blocks_on_free

_MALLINFO2_FIELDS = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in _MALLINFO2_FIELDS.split()]


def _mapped_bytes() -> int:
    """Bytes glibc has handed out from mappings of their own (``mallinfo2().hblkhd``)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    mallinfo2 = getattr(libc, "mallinfo2", None)
    if mallinfo2 is None:
        pytest.skip("glibc older than 2.33: no mallinfo2")
    mallinfo2.restype = _MallInfo2
    return int(mallinfo2().hblkhd)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_big_string_freed_does_not_send_the_next_ones_to_the_heap() -> None:
    """In a fresh interpreter: in a test worker that ran other tests, a free chunk of the heap
    may be big enough to serve the block whatever the threshold, as glibc tries its bins first."""
    done = subprocess.run(
        [sys.executable, __file__], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _big_blocks_are_mapped() -> None:
    assert return_big_blocks_on_free() is True
    size = 4 * BIG_BLOCK_BYTES
    first = bytes(size)  # glibc's default would raise its threshold once this is freed
    del first
    before = _mapped_bytes()
    second = bytes(size)
    assert _mapped_bytes() - before >= size  # in a mapping of its own, returned on free
    del second
    assert _mapped_bytes() == before


if __name__ == "__main__":
    _big_blocks_are_mapped()
