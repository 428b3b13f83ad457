"""Whether a benchmark's scratch folder is on a disk that makes file-heavy builds look slow.

On ext4 mounted without a journal, the kernel skips every inode freed in the last minutes
when it allocates a new one (``recently_deleted`` in ``fs/ext4/ialloc.c``; a journaled ext4
never checks). A benchmark that removes one round's output (tens of thousands of files for a
storm, by tlsite and tlparse alike) and builds again at once then pays for each file it
creates a scan of what was removed: in one measurement, many times what the same files cost
on a journaled ext4, and growing from round to round. Most users' disks (journaled ext4, XFS,
btrfs, APFS, NTFS) have no such check, so timings taken on an unjournaled ext4 are not
theirs. Point ``TMPDIR`` at a journaled filesystem (bench/README.md).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def unjournaled_ext4(folder: str | os.PathLike[str]) -> str | None:
    """The device of ``folder``'s filesystem if it is ext4 without a journal, else None
    (also when Linux does not say: no ``/proc/self/mountinfo`` or no ``journal_task``)."""
    try:
        device = os.stat(folder).st_dev
        wanted = f"{os.major(device)}:{os.minor(device)}"
        mounts = Path("/proc/self/mountinfo").read_bytes().decode("utf-8", "surrogateescape")
        # the name /sys/fs/ext4 knows the device by (dm-0 for /dev/mapper/..., vda, loop0)
        name = os.path.basename(os.readlink(f"/sys/dev/block/{wanted}"))
    except OSError:
        return None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3 or fields[2] != wanted or "-" not in fields:
            continue
        after = fields[fields.index("-") + 1 :]
        if len(after) < 2 or after[0] != "ext4":
            return None
        task = Path("/sys/fs/ext4", name, "journal_task")
        try:
            return after[1] if task.read_text(encoding="utf-8").strip() == "<none>" else None
        except OSError:
            return None
    return None


def warn_if_unjournaled(folder: str | os.PathLike[str]) -> None:
    """Say on stderr when ``folder`` is on such a disk (see the module docstring)."""
    device = unjournaled_ext4(folder)
    if device is not None:
        print(
            f"warning: {folder} is on ext4 without a journal ({device}): creating files soon"
            " after removing many is slow there, for tlsite and tlparse alike, and the times"
            " below are not a user's; set TMPDIR to a folder on a journaled disk"
            " (bench/README.md)",
            file=sys.stderr,
        )
