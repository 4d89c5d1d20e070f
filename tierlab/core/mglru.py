"""The multi-gen LRU (MGLRU, CONFIG_LRU_GEN): generations, tiers, aging, eviction, the refault PID
controller and its workingset shadows.

Models mm/vmscan.c's "CONFIG_LRU_GEN" part (folio_update_gen, folio_inc_gen, inc_min_seq,
try_to_inc_min_seq, inc_max_seq, try_to_inc_max_seq with walk_mm's walk_pte_range,
should_run_aging, read_ctrl_pos/reset_ctrl_pos/positive_ctrl_err, get_tier_idx, get_type_to_scan,
sort_folio, isolate_folio, scan_folios, isolate_folios, lru_gen_look_around, lruvec_is_reclaimable
for min_ttl_ms), include/linux/mm_inline.h (lru_gen_add_folio, lru_gen_del_folio,
lru_gen_update_size, lru_gen_is_active, folio_lru_refs, lru_tier_from_refs), mm/swap.c
(folio_inc_refs: folio_mark_accessed with lru_gen on) and mm/workingset.c (lru_gen_eviction,
lru_gen_refault, lru_gen_test_recent), as in the v6.6-v6.13 trees (read: a v6.6-era mm/vmscan.c
with reclaimer_offset(); "mm/mglru: fix underprotected page cache", v6.8: placement between the
two oldest generations and sort_folio's protection of saturated refs; "mm: fix refault stats for
MGLRU", v6.10: workingset_refault counted for every refault, workingset_activate for recent ones).
Knobs: `lru_gen` (/sys/kernel/mm/lru_gen/enabled: 0x1 core, 0x2 page-table walk), `min_ttl_ms`.
evict_folios() itself, which runs shrink_folio_list(), is in reclaim.py; lru.py dispatches its list
operations, folio_mark_accessed and the workingset shadows here when lru_gen is on.

    per lruvec (LRUVEC_DTYPE): max_seq, min_seq[type]; a generation's slot is seq % MAX_NR_GENS and
        its folios are on lrugen->folios[gen][type] (state.lru_gen_sentinel), newest at the head;
        nr_pages[gen][type]; timestamps[gen] (kernel ms); the PID controller's avg_refaulted,
        avg_total (I term) and refaulted, evicted, protected (P term; NR_HIST_GENS = 1) per type and
        tier. lru_size[] keeps the kernel's active/inactive emulation (the two youngest generations
        count as active), so the nr_{in,}active_* gauges and node_lru_pages() work unchanged.
    per folio (its head): the generation in bits 4-5 of `order` (valid while PG_lru), refs in bits
        6-7, PG_referenced and PG_workingset in `flags`; PG_active only transiently (off the LRU:
        "put me in the youngest generation").

Accesses. Through a file descriptor (read()/write(), filemap.filemap_access -> folio_mark_accessed):
folio_inc_refs() -- the 1st access sets PG_referenced, the 2nd PG_workingset, later ones count refs
up to 3 -- with no lock and no list move (that is the seed-003 point: no activation, so no lru_lock
and no shrink_active_list to undo it). Through page tables: the PTE's young bit only (memory.py);
aging harvests it.

Placement (lru_gen_add_folio): PG_active (faulted in through page tables of a VMA with recency,
cpu.in_lru_fault; a reclaim putback that must not be evicted) -> max_seq; anon otherwise (never in a
swap cache here) -> max_seq - 1; page cache otherwise -> min_seq + 1 when there are 4 generations,
else min_seq (and always min_seq, at the tail, for folio_rotate_reclaimable's `reclaiming` add, which
nothing in tierlab calls).

Aging (try_to_inc_max_seq): with the 0x2 cap, a walk of every mapped VMA (no VM_RAND_READ /
VM_SEQ_READ advice): each present PTE costs lru_gen_walk_pte_ns; a young one on this node is
cleared and its folio moves to the youngest generation (folio_update_gen: refs, PG_referenced and
PG_workingset cleared; the list move is lazy, sort_folio does it). Then inc_max_seq(): a type that
already has MAX_NR_GENS generations first has its oldest generation moved up (inc_min_seq; anon that
cannot be swapped is left where it is and its slot becomes the youngest, as the kernel does).
should_run_aging(): aging is needed with fewer than MIN_NR_GENS + 1 generations, and with exactly
that many when the youngest holds more than half the pages or the oldest eligible one less than a
quarter.

Eviction (isolate_folios/scan_folios from the tail of the oldest generation of the type
get_type_to_scan() picks): sort_folio() moves a folio whose generation was raised lazily to its own
list, protects (to the next generation, protected[tier - 1] += nr) a folio of a tier above the PID
controller's tier_idx or with saturated refs, and otherwise isolate_folio() takes it (refs and
PG_workingset cleared unless PG_referenced, PG_referenced cleared), until MIN_LRU_BATCH pages are
isolated or MAX_LRU_BATCH folios scanned (pgscan_* += isolated, pgrefill += sorted). Then
try_to_inc_min_seq() and shrink_folio_list (reclaim.py): a young mapped folio goes through
lru_gen_look_around() (neighbouring young PTEs within the PMD, at most MIN_LRU_BATCH, are cleared
and their folios moved to the youngest generation: lazily for kswapd, which has a walk, with
folio_activate() for direct reclaim) and is activated (pgactivate); a mapped folio a look-around
already marked PG_referenced is kept; everything else is demoted or evicted; every folio put back
gets PG_active (youngest generation).

The PID controller: get_tier_idx() compares each tier's refault rate refaulted/(evicted +
protected), P plus I (the average over earlier generations, halved at each min_seq step), with tier
0's, with gains 1 (tier 0) : 2; the first tier with a clearly higher rate stops the scan and the
tiers above the previous one are protected. get_type_to_scan() compares anon's and file's tier 0
with gains swappiness : 200 - swappiness. Eviction leaves a shadow token (min_seq << 2 | refs - 1,
PG_workingset = refs > 0) in `stamp`; a refault of the same lruvec counts workingset_refault, and if
the token's seq is still min_seq (recent) refaulted[type][tier] and workingset_activate; a recent
refault in a fault, or one of 4+ accesses, comes back with PG_workingset and saturated refs
(workingset_restore).

min_ttl_ms: kswapd (lru_gen_age_node) finds the node's oldest file generation younger than
min_ttl_ms, or the LRU empty, and calls the OOM killer instead of evicting; tierlab stops the run
with STATUS_OOM (sys.oom_min_ttl_node says which node), as it does for every OOM.

Simplifications, and why:
- No Bloom filters and no mm_struct list: the walk visits every PTE of every mapped VMA (cost per
  PTE), which is what the kernel's walk converges to when most page tables hold young entries; no
  non-leaf PMD young bits (cap 0x4 changes nothing). Without cap 0x2 only look-around ages mapped
  folios, as on hardware without accessed bits.
- No scan priorities (as reclaim.py): reclaim runs one evict_folios() per step, after aging when
  should_run_aging() asks for it -- as below DEF_PRIORITY, where kswapd normally is after
  set_initial_priority(); the kernel returns after aging and evicts on its next pass.
- Dirty or writeback file folios are not held in the next generation with PG_reclaim (sort_folio's
  last case): as in reclaim.py they are written back and reclaimed in the same pass; so evict_folios'
  retry of clean folios that raced with writeback never happens.
- No memcg: one lruvec per node (shrink_one on the node's lruvec); no zones (sort_folio's ineligible
  zone case); no unevictable folios; no swap cache (anon is never "in the swap cache" at placement).
- Refs survive migration (tierlab keeps the page's state; 6.12's folio_migrate_flags does not copy
  LRU_REFS, 6.14's folio_migrate_refs does).

Page-cache promotion under MGLRU (knob pagecache_promotion_lru_gen, a tierlab proposal for seed 000):
the RFC hooks the "already referenced and active" branch of folio_mark_accessed(), which MGLRU never
reaches, so the RFC as posted promotes nothing with lru_gen on ("off"). "refs": an access that
leaves the folio at tier >= 2 (4+ accesses through file descriptors) is a candidate -- the RFC's
own rule (the 4th and later accesses of a folio that stays on the LRU), counted with MGLRU's refs.
"tier": an access to a folio that sort_folio() would protect now -- a tier above the PID
controller's last tier_idx for its type, or saturated refs -- so the candidates are the folios whose
tier refaults more than tier 0 does: promotion follows the same evidence as protection, and a
uniformly random workload (all tiers refault alike) promotes only saturated folios.
"""
from __future__ import annotations

import numpy as np
from ._jit import jit, jit_inline

from .locks import lru_lock
from .mmzone import jiffies_ms
from .params import P
from .profile import K, charge
from .state import (
    ANON_AND_FILE, F2_ANON, F2_MAPPED, F2_PRESENT, FADV_NORMAL, LRU_GEN_ANON, LRU_GEN_FILE, MAX_NR_GENS,
    MAX_NR_TIERS, MIN_NR_GENS, PG_ACTIVE, PG_LRU, PG_REFERENCED, PG_WORKINGSET, PG_YOUNG, folio_nr_pages,
    list_add, list_add_tail, list_del, lru_gen_sentinel, region_of,
)
from .vmstat import Vm

# /sys/kernel/mm/lru_gen/enabled caps (enum lru_gen_caps)
LRU_GEN_CORE = 1
LRU_GEN_MM_WALK = 2
LRU_GEN_NONLEAF_YOUNG = 4

LRU_REFS_WIDTH = 2
LRU_REFS_MASK = (1 << LRU_REFS_WIDTH) - 1   # refs saturate at 3
MIN_LRU_BATCH = 64                          # BITS_PER_LONG
MAX_LRU_BATCH = MIN_LRU_BATCH * 64
MAX_SWAPPINESS = 200
PMD_PAGES = 512
EVICTION_SEQ_MASK = 0xFFFFFFFF >> LRU_REFS_WIDTH   # the shadow token lives in the 32-bit stamp

# order's high nibble (state.py)
GEN_SHIFT = 4
REFS_SHIFT = 6

# enum LruGenPromo: knob pagecache_promotion_lru_gen
LRU_GEN_PROMO_OFF = 0
LRU_GEN_PROMO_REFS = 1
LRU_GEN_PROMO_TIER = 2


@jit_inline
def lru_gen_enabled(p):
    return (np.int64(p[P.LRU_GEN]) & LRU_GEN_CORE) != 0


@jit_inline
def lru_gen_from_seq(seq):
    return np.int64(seq) % MAX_NR_GENS


@jit_inline
def folio_type(s, x):
    """folio_is_file_lru(): LRU_GEN_FILE or LRU_GEN_ANON."""
    return LRU_GEN_ANON if (s.pages.flags2[x] & F2_ANON) else LRU_GEN_FILE


@jit_inline
def folio_lru_gen(s, x):
    """The folio's generation slot (meaningful while PG_lru)."""
    return (np.int64(s.pages.order[x]) >> GEN_SHIFT) & (MAX_NR_GENS - 1)


@jit_inline
def folio_refs(s, x):
    """The LRU_REFS_MASK bits of folio->flags."""
    return (np.int64(s.pages.order[x]) >> REFS_SHIFT) & LRU_REFS_MASK


@jit_inline
def set_folio_gen_refs(s, x, gen, refs):
    v = (np.int64(s.pages.order[x]) & 15) | (gen << GEN_SHIFT) | (refs << REFS_SHIFT)
    s.pages.order[x] = v - 256 if v > 127 else v


@jit_inline
def folio_lru_refs(s, x):
    """Accesses through file descriptors beyond the first: refs + PG_workingset (0..4)."""
    ws = 1 if (s.pages.flags[x] & PG_WORKINGSET) else 0
    return folio_refs(s, x) + ws


@jit_inline
def lru_tier_from_refs(refs):
    """order_base_2(refs + 1): refs 0 -> tier 0, 1 -> 1, 2-3 -> 2, 4 -> 3."""
    if refs == 0:
        return 0
    if refs == 1:
        return 1
    if refs <= 3:
        return 2
    return 3


@jit_inline
def get_nr_gens(s, nid, type):
    return s.lruvec[nid].max_seq - s.lruvec[nid].min_seq[type] + 1


@jit_inline
def lru_gen_is_active(s, nid, gen):
    """The two youngest generations count as active (for the classic gauges)."""
    max_seq = s.lruvec[nid].max_seq
    return gen == lru_gen_from_seq(max_seq) or gen == lru_gen_from_seq(max_seq - 1)


@jit_inline
def lru_gen_update_size(s, nid, x, old_gen, new_gen):
    """Move nr pages of folio x between generations (-1: off the lists) in nr_pages and in the
    active/inactive emulation lru_size[2 * type + active]."""
    type = folio_type(s, x)
    delta = folio_nr_pages(s, x)
    lv = s.lruvec[nid]
    if old_gen >= 0:
        lv.nr_pages[old_gen, type] -= delta
        lv.lru_size[2 * type + (1 if lru_gen_is_active(s, nid, old_gen) else 0)] -= delta
    if new_gen >= 0:
        lv.nr_pages[new_gen, type] += delta
        lv.lru_size[2 * type + (1 if lru_gen_is_active(s, nid, new_gen) else 0)] += delta


@jit_inline
def lru_gen_add_folio(s, x, reclaiming):
    """mm_inline.h lru_gen_add_folio(): pick the generation (module docstring), clear PG_active, and
    add the folio to its list, at the tail when `reclaiming` (folio_rotate_reclaimable)."""
    nid = s.pages.node[x]
    lv = s.lruvec[nid]
    type = folio_type(s, x)
    f = s.pages.flags[x]
    if f & PG_ACTIVE:
        seq = lv.max_seq
    elif type == LRU_GEN_ANON:
        seq = lv.max_seq - 1                 # anon not in a swap cache
    elif reclaiming or lv.min_seq[type] + MIN_NR_GENS >= lv.max_seq:
        seq = lv.min_seq[type]
    else:
        seq = lv.min_seq[type] + 1
    gen = lru_gen_from_seq(seq)
    set_folio_gen_refs(s, x, gen, folio_refs(s, x))
    s.pages.flags[x] = f & ~PG_ACTIVE
    lru_gen_update_size(s, nid, x, -1, gen)
    if reclaiming:
        list_add_tail(s, lru_gen_sentinel(s, nid, gen, type), x)
    else:
        list_add(s, lru_gen_sentinel(s, nid, gen, type), x)


@jit_inline
def lru_gen_del_folio(s, x, reclaiming):
    """mm_inline.h lru_gen_del_folio(): off its list; a folio of an active generation taken off
    other than by reclaim keeps PG_active (for folio_migrate_flags)."""
    nid = s.pages.node[x]
    gen = folio_lru_gen(s, x)
    if not reclaiming and lru_gen_is_active(s, nid, gen):
        s.pages.flags[x] |= PG_ACTIVE
    lru_gen_update_size(s, nid, x, gen, -1)
    list_del(s, x)


@jit_inline
def folio_inc_refs(s, x):
    """mm/swap.c folio_inc_refs(): folio_mark_accessed() with lru_gen on -- PG_referenced, then
    PG_workingset, then refs up to LRU_REFS_MASK. No lock, no list move."""
    f = s.pages.flags[x]
    if not (f & PG_REFERENCED):
        s.pages.flags[x] = f | PG_REFERENCED
        return
    if not (f & PG_WORKINGSET):
        s.pages.flags[x] = f | PG_WORKINGSET
        return
    refs = folio_refs(s, x)
    if refs < LRU_REFS_MASK:
        set_folio_gen_refs(s, x, folio_lru_gen(s, x), refs + 1)


@jit_inline
def folio_lru_refs_after_inc(s, x):
    """folio_lru_refs() as folio_inc_refs() of this access will leave it (no side effect)."""
    f = s.pages.flags[x]
    if not (f & PG_REFERENCED):
        return folio_lru_refs(s, x)
    if not (f & PG_WORKINGSET):
        return folio_refs(s, x) + 1
    return min(folio_refs(s, x) + 1, LRU_REFS_MASK) + 1


@jit_inline
def lru_gen_promotion_hot(s, p, x):
    """Whether this access makes the folio a page-cache promotion candidate under MGLRU (knob
    pagecache_promotion_lru_gen; module docstring), judged on the refs the access leaves."""
    mode = np.int64(p[P.PAGECACHE_PROMOTION_LRU_GEN])
    if mode == LRU_GEN_PROMO_OFF:
        return False
    refs = folio_lru_refs_after_inc(s, x)
    if mode == LRU_GEN_PROMO_REFS:
        return refs >= 3
    tier = lru_tier_from_refs(refs)
    return tier > s.lruvec[s.pages.node[x]].tier_idx[folio_type(s, x)] or refs == LRU_REFS_MASK + 1


@jit_inline
def folio_update_gen(s, nid, x, gen):
    """folio_update_gen() plus its batch accounting: a folio off the LRU (isolated, batched) only
    gets PG_referenced; one on it moves to `gen` with refs, PG_referenced and PG_workingset cleared
    (the list move is lazy: sort_folio finds it in its old list). Returns the old generation or -1."""
    if not (s.pages.flags[x] & PG_LRU):
        s.pages.flags[x] |= PG_REFERENCED
        return -1
    old = folio_lru_gen(s, x)
    s.pages.flags[x] &= ~(PG_REFERENCED | PG_WORKINGSET)
    set_folio_gen_refs(s, x, gen, 0)
    if old != gen:
        lru_gen_update_size(s, nid, x, old, gen)
    return old


@jit_inline
def folio_inc_gen(s, nid, x, type):
    """folio_inc_gen(): a folio in the oldest generation moves to the next one (refs, PG_referenced
    and PG_workingset cleared); one whose generation was raised already keeps it. Returns its
    generation."""
    old_gen = lru_gen_from_seq(s.lruvec[nid].min_seq[type])
    gen = folio_lru_gen(s, x)
    if gen != old_gen:
        return gen
    new_gen = (old_gen + 1) % MAX_NR_GENS
    s.pages.flags[x] &= ~(PG_REFERENCED | PG_WORKINGSET)
    set_folio_gen_refs(s, x, new_gen, 0)
    lru_gen_update_size(s, nid, x, old_gen, new_gen)
    return new_gen


@jit_inline
def list_move(s, head, x):
    list_del(s, x)
    list_add(s, head, x)


@jit_inline
def list_move_tail(s, head, x):
    list_del(s, x)
    list_add_tail(s, head, x)


# ---- the PID controller ---------------------------------------------------------------------

@jit_inline
def read_ctrl_pos(s, nid, type, tier):
    """(refaulted, total) of one tier: the I term (avg_*) plus this generation's P term."""
    lv = s.lruvec[nid]
    refaulted = lv.avg_refaulted[type, tier] + lv.refaulted[type, tier]
    total = lv.avg_total[type, tier] + lv.evicted[type, tier]
    if tier > 0:
        total += lv.protected[type, tier - 1]
    return refaulted, total


@jit_inline
def positive_ctrl_err(sp_refaulted, sp_total, sp_gain, pv_refaulted, pv_total, pv_gain):
    """True when the PV has few refaults or a refault rate not above the SP's (scaled by the gains)."""
    return (pv_refaulted < MIN_LRU_BATCH
            or pv_refaulted * (sp_total + MIN_LRU_BATCH) * sp_gain <= (sp_refaulted + 1) * pv_total * pv_gain)


@jit
def reset_ctrl_pos(s, nid, type):
    """reset_ctrl_pos(carryover) when min_seq[type] advances: the averages take half of the
    generation that ends (P folded into I), and the current counts start again."""
    lv = s.lruvec[nid]
    for tier in range(MAX_NR_TIERS):
        lv.avg_refaulted[type, tier] = (lv.avg_refaulted[type, tier] + lv.refaulted[type, tier]) // 2
        total = lv.avg_total[type, tier] + lv.evicted[type, tier]
        if tier > 0:
            total += lv.protected[type, tier - 1]
            lv.protected[type, tier - 1] = 0
        lv.avg_total[type, tier] = total // 2
        lv.refaulted[type, tier] = 0
        lv.evicted[type, tier] = 0


@jit
def get_tier_idx(s, nid, type):
    """The highest tier to evict: tiers are compared with tier 0 (gains 1 : 2) and the first one
    that refaults clearly more stops the scan."""
    sp_r, sp_t = read_ctrl_pos(s, nid, type, 0)
    tier = 1
    while tier < MAX_NR_TIERS:
        pv_r, pv_t = read_ctrl_pos(s, nid, type, tier)
        if not positive_ctrl_err(sp_r, sp_t, 1, pv_r, pv_t, 2):
            break
        tier += 1
    return tier - 1


@jit
def get_type_to_scan(s, nid, swappiness):
    """Anon or file by their tier 0 refault rates with gains swappiness : 200 - swappiness; then the
    selected type's tiers against the other type's tier 0. Returns (type, tier_idx)."""
    gain_anon = swappiness
    gain_file = MAX_SWAPPINESS - swappiness
    sp_r, sp_t = read_ctrl_pos(s, nid, LRU_GEN_ANON, 0)
    pv_r, pv_t = read_ctrl_pos(s, nid, LRU_GEN_FILE, 0)
    type = LRU_GEN_FILE if positive_ctrl_err(sp_r, sp_t, gain_anon, pv_r, pv_t, gain_file) else LRU_GEN_ANON
    other = 1 - type
    sp_gain = gain_file if other == LRU_GEN_FILE else gain_anon
    pv_gain = gain_file if type == LRU_GEN_FILE else gain_anon
    sp_r, sp_t = read_ctrl_pos(s, nid, other, 0)
    tier = 1
    while tier < MAX_NR_TIERS:
        pv_r, pv_t = read_ctrl_pos(s, nid, type, tier)
        if not positive_ctrl_err(sp_r, sp_t, sp_gain, pv_r, pv_t, pv_gain):
            break
        tier += 1
    return type, tier - 1


# ---- generations ----------------------------------------------------------------------------

@jit
def inc_min_seq(s, nid, type, can_swap):
    """Move every folio of the oldest generation of `type` to the next one (folio_inc_gen), fold the
    controller's statistics and advance min_seq. Anon that cannot be swapped stays where it is (its
    slot becomes the youngest generation). Returns the folios moved."""
    moved = 0
    if type == LRU_GEN_FILE or can_swap:
        old_gen = lru_gen_from_seq(s.lruvec[nid].min_seq[type])
        head = lru_gen_sentinel(s, nid, old_gen, type)
        while s.pages.prev[head] != head:
            x = s.pages.prev[head]
            gen = folio_inc_gen(s, nid, x, type)
            list_move_tail(s, lru_gen_sentinel(s, nid, gen, type), x)
            moved += 1
    reset_ctrl_pos(s, nid, type)
    s.lruvec[nid].min_seq[type] += 1
    return moved


@jit
def try_to_inc_min_seq(s, nid, can_swap):
    """Drop the empty oldest generations (never below MIN_NR_GENS); with swap, file's min_seq may not
    pass anon's. Returns True when a min_seq moved."""
    lv = s.lruvec[nid]
    ms0 = lv.min_seq[LRU_GEN_ANON]
    ms1 = lv.min_seq[LRU_GEN_FILE]
    for type in range(0 if can_swap else 1, ANON_AND_FILE):
        seq = ms0 if type == LRU_GEN_ANON else ms1
        while seq + MIN_NR_GENS <= lv.max_seq:
            head = lru_gen_sentinel(s, nid, lru_gen_from_seq(seq), type)
            if s.pages.next[head] != head:
                break
            seq += 1
        if type == LRU_GEN_ANON:
            ms0 = seq
        else:
            ms1 = seq
    if can_swap:
        ms0 = min(ms0, ms1)
        ms1 = max(ms0, lv.min_seq[LRU_GEN_FILE])
    success = False
    for type in range(0 if can_swap else 1, ANON_AND_FILE):
        seq = ms0 if type == LRU_GEN_ANON else ms1
        if seq == lv.min_seq[type]:
            continue
        reset_ctrl_pos(s, nid, type)
        lv.min_seq[type] = seq
        success = True
    return success


@jit
def inc_max_seq(s, p, nid, can_swap, now):
    """A new youngest generation: types that already have MAX_NR_GENS first lose their oldest
    (inc_min_seq); the generation that stops being one of the two youngest moves to the inactive
    emulation; its timestamp is now. Returns the folios inc_min_seq moved."""
    lv = s.lruvec[nid]
    moved = 0
    for type in range(ANON_AND_FILE - 1, -1, -1):
        if get_nr_gens(s, nid, type) == MAX_NR_GENS:
            moved += inc_min_seq(s, nid, type, can_swap)
    prev = lru_gen_from_seq(lv.max_seq - 1)
    nxt = lru_gen_from_seq(lv.max_seq + 1)
    for type in range(ANON_AND_FILE):
        delta = lv.nr_pages[prev, type] - lv.nr_pages[nxt, type]
        lv.lru_size[2 * type] += delta
        lv.lru_size[2 * type + 1] -= delta
    lv.timestamps[nxt] = jiffies_ms(p, now)
    lv.max_seq += 1
    return moved


@jit_inline
def vma_has_recency(s, r):
    """vma_has_recency(): no VM_RAND_READ / VM_SEQ_READ advice on the region (the page-table walk
    skips such VMAs, and their faults do not make folios active)."""
    return s.regions.advice[r] == FADV_NORMAL


@jit
def walk_mm(s, p, nid, can_swap, gen):
    """The aging walk (walk_pte_range over every mapped VMA with recency): young PTEs of folios on
    node nid are cleared and the folios moved to generation `gen`; anon only when it can be swapped.
    Returns the cost in ns."""
    cost = 0.0
    pg = s.pages
    for r in range(s.regions.kind.shape[0]):
        if s.regions.mm[r] < 0 or not vma_has_recency(s, r):
            continue
        for x in range(s.regions.start[r], s.regions.end[r]):
            f2 = pg.flags2[x]
            if (f2 & (F2_PRESENT | F2_MAPPED)) != (F2_PRESENT | F2_MAPPED):
                continue
            nr = folio_nr_pages(s, x)
            cost += p[P.LRU_GEN_WALK_PTE_NS] * nr
            if not (pg.flags[x] & PG_YOUNG) or pg.node[x] != nid:
                continue
            if (f2 & F2_ANON) and not can_swap:
                continue
            pg.flags[x] &= ~PG_YOUNG
            cost += p[P.LRU_GEN_WALK_YOUNG_NS]
            folio_update_gen(s, nid, x, gen)
    return charge(s, K.WALK_PTE_RANGE, cost)


@jit
def try_to_inc_max_seq(s, p, nid, can_swap, now):
    """Aging: walk the page tables (cap 0x2) into the youngest generation, then inc_max_seq() under
    lru_lock. Returns the cost in ns."""
    cost = 0.0
    if np.int64(p[P.LRU_GEN]) & LRU_GEN_MM_WALK:
        cost += walk_mm(s, p, nid, can_swap, lru_gen_from_seq(s.lruvec[nid].max_seq))
    moved = inc_max_seq(s, p, nid, can_swap, now + np.int64(cost))
    cost += lru_lock(s, p, nid, now + np.int64(cost), moved) + charge(s, K.INC_MAX_SEQ, p[P.LRU_GEN_SORT_NS] * moved)
    return cost


@jit
def should_run_aging(s, nid, can_swap):
    """should_run_aging(): must with fewer than MIN_NR_GENS + 1 eligible generations; with exactly
    that many, when the youngest holds more than 1/MIN_NR_GENS of the pages or the oldest eligible
    less than 1/(MIN_NR_GENS + 2)."""
    lv = s.lruvec[nid]
    min_type = 0 if can_swap else 1
    if lv.min_seq[min_type] + MIN_NR_GENS > lv.max_seq:
        return True
    if lv.min_seq[min_type] + MIN_NR_GENS < lv.max_seq:
        return False
    young = 0
    old = 0
    total = 0
    for type in range(min_type, ANON_AND_FILE):
        for seq in range(lv.min_seq[type], lv.max_seq + 1):
            size = max(lv.nr_pages[lru_gen_from_seq(seq), type], 0)
            total += size
            if seq == lv.max_seq:
                young += size
            elif seq + MIN_NR_GENS == lv.max_seq:
                old += size
    return young * MIN_NR_GENS > total or old * (MIN_NR_GENS + 2) < total


# ---- eviction -------------------------------------------------------------------------------

@jit_inline
def sort_folio(s, nid, x, type, tier_idx):
    """Keep a folio on the LRU instead of isolating it: already promoted (its generation is not the
    oldest) -> to its generation's list; protected (tier above tier_idx, or saturated refs) -> the
    next generation, protected[tier - 1] += nr. Returns True when sorted."""
    lv = s.lruvec[nid]
    gen = folio_lru_gen(s, x)
    if gen != lru_gen_from_seq(lv.min_seq[type]):
        list_move(s, lru_gen_sentinel(s, nid, gen, type), x)
        return True
    refs = folio_lru_refs(s, x)
    tier = lru_tier_from_refs(refs)
    if tier > tier_idx or refs == LRU_REFS_MASK + 1:
        delta = folio_nr_pages(s, x)
        gen = folio_inc_gen(s, nid, x, type)
        list_move_tail(s, lru_gen_sentinel(s, nid, gen, type), x)
        lv.protected[type, tier - 1] += delta
        return True
    return False


@jit_inline
def isolate_folio(s, nid, x):
    """isolate_folio(): refs and PG_workingset go unless PG_referenced is set; PG_referenced goes."""
    f = s.pages.flags[x]
    if not (f & PG_REFERENCED):
        f &= ~PG_WORKINGSET
        set_folio_gen_refs(s, x, folio_lru_gen(s, x), 0)
    s.pages.flags[x] = f & ~PG_REFERENCED
    lru_gen_del_folio(s, x, True)
    s.pages.flags[x] &= ~PG_LRU
    s.pgdat[nid].nr_isolated += folio_nr_pages(s, x)


@jit
def scan_folios(s, nid, type, tier, kswapd, scratch):
    """scan_folios(): from the tail of the oldest generation of `type`, sort or isolate folios into
    scratch until MIN_LRU_BATCH pages are isolated or MAX_LRU_BATCH folios scanned. Counts pgscan_*
    (isolated pages) and pgrefill (sorted pages). Returns the pages scanned (0 when nothing could be
    isolated and the batch was not used up), the folios isolated and the folios sorted."""
    if get_nr_gens(s, nid, type) == MIN_NR_GENS:
        return 0, 0, 0
    head = lru_gen_sentinel(s, nid, lru_gen_from_seq(s.lruvec[nid].min_seq[type]), type)
    scanned = 0
    sorted_pages = 0
    isolated = 0
    n = 0
    nr_sorted = 0
    remaining = MAX_LRU_BATCH
    while s.pages.prev[head] != head:
        x = s.pages.prev[head]
        delta = folio_nr_pages(s, x)
        scanned += delta
        if sort_folio(s, nid, x, type, tier):
            sorted_pages += delta
            nr_sorted += 1
        else:
            isolate_folio(s, nid, x)
            scratch[n] = x
            n += 1
            isolated += delta
        remaining -= 1
        if remaining == 0 or isolated >= MIN_LRU_BATCH:
            break
    s.counters[nid, Vm.PGSCAN_KSWAPD if kswapd else Vm.PGSCAN_DIRECT] += isolated
    s.counters[nid, Vm.PGREFILL] += sorted_pages
    s.counters[nid, Vm.PGSCAN_FILE if type == LRU_GEN_FILE else Vm.PGSCAN_ANON] += isolated
    if isolated > 0 or remaining == 0:
        return scanned, n, nr_sorted
    return 0, n, nr_sorted


@jit
def isolate_folios(s, nid, swappiness, kswapd, scratch):
    """isolate_folios(): the type to scan (file without swappiness; anon while its min_seq lags;
    else the PID controller), the tier to evict up to, and scan_folios(); the other type when the
    first yields nothing. Returns (pages scanned, type, folios isolated, folios sorted).
    The controller's decision is kept in lruvec.tier_idx."""
    lv = s.lruvec[nid]
    tier = -1
    if swappiness == 0:
        type = LRU_GEN_FILE
    elif lv.min_seq[LRU_GEN_ANON] < lv.min_seq[LRU_GEN_FILE]:
        type = LRU_GEN_ANON
    elif swappiness == 1:
        type = LRU_GEN_FILE
    elif swappiness == MAX_SWAPPINESS:
        type = LRU_GEN_ANON
    else:
        type, tier = get_type_to_scan(s, nid, swappiness)
    scanned = 0
    n = 0
    nr_sorted = 0
    for i in range(0 if swappiness else 1, ANON_AND_FILE):
        if tier < 0:
            tier = get_tier_idx(s, nid, type)
        lv.tier_idx[type] = tier
        scanned, n, sorted_here = scan_folios(s, nid, type, tier, kswapd, scratch)
        nr_sorted += sorted_here
        if scanned:
            break
        type = 1 - type
        tier = -1
    return scanned, type, n, nr_sorted


@jit
def lru_gen_look_around(s, p, nid, x, kswapd, now):
    """lru_gen_look_around(), from folio_referenced() on a young mapped folio being evicted: the
    young PTEs around it (the PMD's range within the VMA, at most MIN_LRU_BATCH pages centred on it)
    are cleared and their folios (on this node; anon only from an anon folio) promoted: kswapd has a
    walk, so folio_update_gen() (the folio itself and other isolated ones get PG_referenced);
    direct reclaim activates them (folio_activate: pgactivate). Returns the cost in ns."""
    r = region_of(s, x)
    lo_vma = s.regions.start[r]
    hi_vma = s.regions.end[r]
    start = lo_vma + ((x - lo_vma) & ~(PMD_PAGES - 1))
    end = min(start + PMD_PAGES, hi_vma)
    if end - start > MIN_LRU_BATCH:
        if x - start < MIN_LRU_BATCH // 2:
            end = start + MIN_LRU_BATCH
        elif end - x < MIN_LRU_BATCH // 2:
            start = end - MIN_LRU_BATCH
        else:
            start = x - MIN_LRU_BATCH // 2
            end = x + MIN_LRU_BATCH // 2
    file = not (s.pages.flags2[x] & F2_ANON)
    new_gen = lru_gen_from_seq(s.lruvec[nid].max_seq)
    cost = 0.0
    work = 0.0
    pg = s.pages
    for y in range(start, end):
        f2 = pg.flags2[y]
        if (f2 & (F2_PRESENT | F2_MAPPED)) != (F2_PRESENT | F2_MAPPED):
            continue
        work += p[P.LRU_GEN_WALK_PTE_NS]
        if not (pg.flags[y] & PG_YOUNG) or pg.node[y] != nid:
            continue
        if file and (f2 & F2_ANON):
            continue
        pg.flags[y] &= ~PG_YOUNG
        work += p[P.LRU_GEN_WALK_YOUNG_NS]
        if kswapd:
            folio_update_gen(s, nid, y, new_gen)
        elif not (pg.flags[y] & PG_LRU):
            pg.flags[y] |= PG_REFERENCED
        elif folio_lru_gen(s, y) != new_gen:
            # folio_activate(): lru_activate moves it to the youngest generation
            cost += lru_lock(s, p, nid, now + np.int64(cost + work), 1) + charge(s, K.ACTIVATE_PAGE, p[P.ACTIVATE_NS])
            lru_gen_del_folio(s, y, False)
            pg.flags[y] |= PG_ACTIVE
            lru_gen_add_folio(s, y, False)
            s.counters[nid, Vm.PGACTIVATE] += folio_nr_pages(s, y)
    return cost + charge(s, K.LRU_GEN_LOOK_AROUND, work)


@jit_inline
def lru_gen_putback_flags(s, x):
    """evict_folios(): a folio shrink_folio_list keeps goes back with PG_active (the youngest
    generation) and without refs, PG_referenced and PG_workingset."""
    s.pages.flags[x] = (s.pages.flags[x] & ~(PG_REFERENCED | PG_WORKINGSET)) | PG_ACTIVE
    set_folio_gen_refs(s, x, folio_lru_gen(s, x), 0)


# ---- workingset shadows ---------------------------------------------------------------------

@jit_inline
def lru_gen_eviction(s, nid, x):
    """lru_gen_eviction(): count the eviction in its tier; returns the shadow token (min_seq << 2 |
    max(refs - 1, 0), 32 bits) and its workingset bit (refs > 0)."""
    type = folio_type(s, x)
    refs = folio_lru_refs(s, x)
    tier = lru_tier_from_refs(refs)
    min_seq = s.lruvec[nid].min_seq[type]
    s.lruvec[nid].evicted[type, tier] += folio_nr_pages(s, x)
    token = ((min_seq << LRU_REFS_WIDTH) | max(refs - 1, 0)) & 0xFFFFFFFF
    return np.uint32(token), refs > 0


@jit
def lru_gen_refault(s, x, new_nid, evict_nid, in_fault):
    """lru_gen_refault() for the new folio x whose page held the shadow (token in stamp, workingset
    bit in flags): nothing unless it refaults into the lruvec it was evicted from; workingset_refault
    always, and when the token's seq is still min_seq (recent): refaulted[type][tier] and
    workingset_activate; a recent refault in a page fault, or of 4+ accesses, comes back with
    PG_workingset and saturated refs (workingset_restore)."""
    ws = (s.pages.flags[x] & PG_WORKINGSET) != 0
    s.pages.flags[x] &= ~PG_WORKINGSET
    if new_nid != evict_nid:
        return
    type = folio_type(s, x)
    delta = folio_nr_pages(s, x)
    anon = type == LRU_GEN_ANON
    s.counters[new_nid, Vm.WORKINGSET_REFAULT_ANON if anon else Vm.WORKINGSET_REFAULT_FILE] += delta
    token = np.int64(s.pages.stamp[x])
    lv = s.lruvec[new_nid]
    if (token >> LRU_REFS_WIDTH) != (lv.min_seq[type] & EVICTION_SEQ_MASK):
        return
    refs = (token & LRU_REFS_MASK) + (1 if ws else 0)
    lv.refaulted[type, lru_tier_from_refs(refs)] += delta
    s.counters[new_nid, Vm.WORKINGSET_ACTIVATE_ANON if anon else Vm.WORKINGSET_ACTIVATE_FILE] += delta
    if in_fault or refs >= LRU_REFS_MASK:
        s.pages.flags[x] |= PG_WORKINGSET
        set_folio_gen_refs(s, x, folio_lru_gen(s, x), LRU_REFS_MASK)
        s.counters[new_nid, Vm.WORKINGSET_RESTORE_ANON if anon else Vm.WORKINGSET_RESTORE_FILE] += delta


# ---- thrash protection ----------------------------------------------------------------------

@jit
def lruvec_is_reclaimable(s, p, nid, now):
    """lruvec_is_reclaimable() for min_ttl_ms: the oldest file generation is at least min_ttl_ms old
    and the LRU holds pages (lruvec_is_sizable without priorities)."""
    lv = s.lruvec[nid]
    birth = lv.timestamps[lru_gen_from_seq(lv.min_seq[LRU_GEN_FILE])]
    if birth + np.int64(p[P.MIN_TTL_MS]) > jiffies_ms(p, now):
        return False
    total = 0
    for gen in range(MAX_NR_GENS):
        for type in range(ANON_AND_FILE):
            total += max(lv.nr_pages[gen, type], 0)
    return total > 0
