"""posix_fadvise() (mm/fadvise.c generic_fadvise): the access advice readahead follows.

RANDOM sets FMODE_RANDOM on the file (page_cache_sync_ra then reads only the requested pages),
SEQUENTIAL doubles the file's readahead window (file->f_ra.ra_pages) and clears FMODE_RANDOM, NORMAL
restores both (readahead.py reads the advice).

Simplifications: the advice is the file's (Region.advice), shared by every task that reads it,
where the kernel keeps it per open file; only whole-file advice, and not WILLNEED, DONTNEED or
NOREUSE.
"""
from __future__ import annotations

from ._jit import jit_inline


@jit_inline
def generic_fadvise(s, r, advice):
    """Region r's file gets `advice` (state.FADV_*)."""
    s.regions.advice[r] = advice
