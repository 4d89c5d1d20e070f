"""The CPUs' TLBs: per-CPU first-level data and instruction TLBs and a shared second level (STLB),
set-associative with LRU replacement, as an x86 server core has them (the machine file's `[tlb]`
table gives the geometry). What tlb.py's flushes do to them, and what they cost an access.

- tlb_access(): the access path's translation (the one access path, memory.pte_access, after
  any fault): the instruction fetch first (the task's text, an iTLB lookup), then the data
  address: dTLB, then STLB, then a page walk that fills both. A store that hits an entry without
  the write permission walks again (the PTE may have become writable). dTLB-load-misses,
  dTLB-store-misses and iTLB-load-misses count the walks (an STLB miss), as Intel's generic perf
  events do (DTLB_LOAD_MISSES.WALK_COMPLETED, ...).
- cpu_tlb_flush(): a CPU executing a flush: a whole flush bumps the CPU's generation (every entry
  filled under an older one is invalid: O(1); a set is emptied at its next lookup); a ranged one
  invalidates those pages (INVLPG).
  tlb_cpu_flush_all / tlb_cpu_flush_one count what each CPU executed (the receipts, the sender's
  own flush, and the flush a lazy CPU owes when it returns to a user task).
- Lazy CPUs (tlb.cpu_is_lazy) are skipped by shootdowns; x86 flushes when such a CPU switches back
  to the mm with a newer tlb_gen (switch_mm_irqs_off, need_flush): here a skipped CPU is marked and
  flushes whole at its next translation.
- Stale translations: each entry keeps the node of the frame it was filled with. A hit on an entry
  whose node is not the page's node now is a stale translation -- MIGRC's window, where the
  source frame is held and read-only. tlb_stale_hits counts them; tlb_stale_write_hits (a store
  through one) and tlb_stale_freed_hits (a read whose node has no held source left) are the
  invariants that must stay 0.

Simplified: entries are tagged by page id (a page has one mapping, so its id is its virtual
page; PCID keeps entries across switches between mm's, so no flush on a context switch); a
PMD-mapped folio (a THP) takes one entry tagged by its head, in the same arrays (Skylake's STLB
holds 4 KiB and 2 MiB entries alike; its separate 32-entry 2 MiB dTLB is not modelled); the
instruction stream is the mm's `text_pages` pages of hot code fetched round robin, one per
access (a loop whose text fits the iTLB misses only after a flush); kernel text (global pages,
though not under PTI), read()/write()'s kernel mappings and loads of the shared zero page are not
translated here. A receipt flushes only when tlb.flush_tlb_func() says so (the x86 tlb_gen
check: nothing for a CPU an earlier flush already brought up to date).
With `geo` all zero (the Simulation's tlb_model off) nothing here runs.
"""
from __future__ import annotations

import numpy as np

from ._jit import jit, jit_inline
from .state import ORDER_MASK
from .vmstat import Vm

DTLB = 0        # levels: rows of TlbArrays.geo and the middle index of its entry arrays
ITLB = 1
STLB = 2
NR_TLB_LEVELS = 3
NO_TAG = np.int64(-1)
TEXT_TAG_BASE = np.int64(-2)   # text page k of mm m: TEXT_TAG_BASE - m * TEXT_TAG_STRIDE - k
TEXT_TAG_STRIDE = np.int64(1 << 20)
HPAGE_PMD_NR = 512      # a folio this large is PMD-mapped (memory.py): one entry


@jit_inline
def tlb_model_on(s):
    return s.tlbs.geo[DTLB, 0] > 0


@jit_inline
def translation_tag(s, page):
    """The tag of the entry that translates `page`: the page, or the head of the PMD-mapped folio
    holding it (one 2 MiB entry; an INVLPG of any of its addresses removes it)."""
    nr = np.int64(1) << np.int64(s.pages.order[page] & ORDER_MASK)
    if nr >= HPAGE_PMD_NR:
        return page & ~(nr - 1)
    return page


@jit_inline
def tlb_lookup(t, cpu, lvl, tag, gen):
    """Look up `tag` in its set of `lvl` on `cpu`. Returns (the way holding `tag` under the CPU's
    generation, or -1; the way a fill of `tag` takes if that way is invalidated first or none holds
    it): the first invalid way (empty or of an older generation), else the first of the least
    recently used. The set must not change between the lookup and that fill.

    A generation is kept per set, not per way: a set whose generation is older than the CPU's is
    emptied at its first lookup since the flush (its every entry was invalid; their LRU stamps are
    never read before a fill, as an invalid way is always taken first), so within a set every tag
    but NO_TAG is valid. The hit is found comparing tags only; the stamps are read only to choose
    a victim in a full set."""
    sets = t.geo[lvl, 0]
    ways = np.uint64(t.geo[lvl, 1])
    si = np.uint64(tag & (sets - 1))
    base = si * ways
    end = base + ways
    tags = t.tag[np.uint64(cpu), np.uint64(lvl)]     # unsigned: no negative-index fix-up per way
    set_gen = t.set_gen[np.uint64(cpu), np.uint64(lvl)]
    if set_gen[si] != gen:
        for i in range(base, end):
            tags[i] = NO_TAG
        set_gen[si] = gen
        return np.int64(-1), np.int64(base)
    invalid = np.int64(-1)
    for i in range(base, end):
        tg = tags[i]
        if tg == tag:
            # a fill after this way is invalidated (a store to a read-only entry) takes the first
            # invalid way: one before it, else this one
            return np.int64(i), (invalid if invalid >= 0 else np.int64(i))
        if tg == NO_TAG and invalid < 0:
            invalid = np.int64(i)
    if invalid >= 0:
        return np.int64(-1), invalid
    stamps = t.stamp[np.uint64(cpu), np.uint64(lvl)]
    victim = base
    oldest = stamps[base]
    for i in range(base + np.uint64(1), end):
        if stamps[i] < oldest:
            oldest = stamps[i]
            victim = i
    return np.int64(-1), np.int64(victim)


@jit_inline
def tlb_put(t, cpu, lvl, way, tag, tick, nid, writable):
    """Put a translation in `way` of `lvl` (tlb_lookup's choice, so its set is of the CPU's
    generation)."""
    t.tag[cpu, lvl, way] = tag
    t.stamp[cpu, lvl, way] = tick
    t.node[cpu, lvl, way] = nid
    t.wr[cpu, lvl, way] = writable


@jit_inline
def tlb_invalidate(t, cpu, lvl, tag, gen):
    i, _ = tlb_lookup(t, cpu, lvl, tag, gen)
    if i >= 0:
        t.tag[cpu, lvl, i] = NO_TAG


@jit_inline
def held_on(pgdat, nid):
    """Source folios MIGRC holds on node nid (kept by a batch or already pending)."""
    return pgdat[nid].migrc_pending_nr + pgdat[nid].migrc_batch_nr


@jit_inline
def check_stale(t, pgdat, counters, cpu, lvl, i, nid, store, cpu_nid):
    """A hit on way i: a translation to a frame on another node than the page's is stale."""
    old = np.int64(t.node[cpu, lvl, i])
    if old == nid:
        return
    counters[cpu_nid, Vm.TLB_STALE_HITS] += 1
    if store:
        counters[cpu_nid, Vm.TLB_STALE_WRITE_HITS] += 1
    if held_on(pgdat, old) == 0:
        counters[cpu_nid, Vm.TLB_STALE_FREED_HITS] += 1


@jit_inline
def translate(t, pgdat, counters, cpu, cpu_nid, first, tag, nid, writable, store, gen, tick):
    """One translation through `first` (DTLB or ITLB) and the STLB. Returns 1 for a page walk.
    The two levels are one loop, so that the lookup is compiled once (the compile budget counts
    an inlined kernel at every call site)."""
    lvl = first
    vi = np.int64(-1)
    for _ in range(2):
        i, v = tlb_lookup(t, cpu, lvl, tag, gen)
        if lvl == first:
            vi = v
        if i >= 0:
            if not (store and not t.wr[cpu, lvl, i]):
                t.stamp[cpu, lvl, i] = tick
                if first == DTLB:   # a text entry is never stale: every fill of a text tag has node -1
                    check_stale(t, pgdat, counters, cpu, lvl, i, nid, store, cpu_nid)
                if lvl == STLB:
                    tlb_put(t, cpu, first, vi, tag, tick, t.node[cpu, STLB, i], t.wr[cpu, STLB, i])
                return 0
            t.tag[cpu, lvl, i] = NO_TAG      # a store to a read-only entry walks again
        if lvl == STLB:
            tlb_put(t, cpu, STLB, v, tag, tick, nid, writable)
        lvl = STLB
    tlb_put(t, cpu, first, vi, tag, tick, nid, writable)
    return 1


@jit_inline
def tlb_access(s, task, cpu, cpu_nid, tag, nid, writable, store):
    """The translations of one access by `task` on `cpu` (of node cpu_nid) to the page (or
    PMD-mapped folio head) `tag` whose frame is on node nid, through a PTE that is `writable`: the
    fetch of the task's next text page, then the data address. Counts the walks; returns their
    number. Inlined into the access path (the loads of the arrays it uses are then made once per
    run, not at every call); the two translations are one loop over the first levels so that its
    body is compiled once (the compile budget counts an inlined kernel at every call site)."""
    t = s.tlbs
    counters = s.counters
    if t.need_flush[cpu]:
        t.need_flush[cpu] = 0
        tlb_flush_all(t, counters, cpu, cpu_nid)
    gen = t.cpu_gen[cpu]
    t.cpu_tick[cpu] += 1
    tick = t.cpu_tick[cpu]
    walks = 0
    mm = s.task[task].mm
    nt = s.mm[mm].text_pages
    for first in range(ITLB, DTLB - 1, -1):
        if first == ITLB:
            if nt <= 0:
                continue
            k = s.task[task].text_next
            s.task[task].text_next = k + 1 if k + 1 < nt else 0
            xtag, xnid, xwr, xstore = TEXT_TAG_BASE - mm * TEXT_TAG_STRIDE - k, np.int64(-1), 0, False
            miss = Vm.ITLB_LOAD_MISSES
        else:
            xtag, xnid, xwr, xstore = tag, nid, 1 if writable else 0, store
            miss = Vm.DTLB_STORE_MISSES if store else Vm.DTLB_LOAD_MISSES
        if translate(t, s.pgdat, counters, cpu, cpu_nid, first, xtag, xnid, xwr, xstore, gen, tick):
            counters[cpu_nid, miss] += 1
            walks += 1
    return walks


@jit_inline
def tlb_flush_all(t, counters, cpu, nid):
    """`cpu` (of node nid) flushes its whole TLB: every entry filled under an older generation is
    invalid."""
    t.cpu_gen[cpu] += 1
    counters[nid, Vm.TLB_CPU_FLUSH_ALL] += 1


@jit_inline
def cpu_tlb_flush(s, cpu, start, nr_pages):
    """`cpu` executes a flush: whole (nr_pages 0, tlb.FLUSH_ALL) or of pages [start, start +
    nr_pages) of the data and shared levels (INVLPG; a page's translation may be in both)."""
    t = s.tlbs
    if not tlb_model_on(s):
        return
    nid = s.cpu[cpu].node
    if nr_pages == 0:
        tlb_flush_all(t, s.counters, cpu, nid)
        return
    gen = t.cpu_gen[cpu]
    for pg in range(start, start + nr_pages):
        tag = translation_tag(s, pg)
        tlb_invalidate(t, cpu, DTLB, tag, gen)
        tlb_invalidate(t, cpu, STLB, tag, gen)
    s.counters[nid, Vm.TLB_CPU_FLUSH_ONE] += nr_pages


@jit_inline
def cpu_tlb_skip_lazy(s, cpu):
    """A lazy CPU a shootdown skipped flushes when it next runs a user task."""
    if tlb_model_on(s):
        s.tlbs.need_flush[cpu] = 1
