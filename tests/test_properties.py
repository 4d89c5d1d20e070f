"""Property tests: over generated tiny machines, knob settings and access mixes, the engine's state
stays consistent and its counters obey the kernel's accounting identities.

After every chunk of accesses:
- every present folio is on exactly one place: one LRU list (the one its flags select, on its own
  node, with PG_lru), one CPU's lru_add batch (F2_BATCHED, no PG_lru) or one task's promotion list
  (PG_isolated); lists are well linked; lru_size is the pages on each list; nr_isolated the pages
  isolated per node;
- free + present pages (+ MIGRC's held sources, + the buddy's per-CPU lists) == managed on every
  node, free >= 0, counters >= 0; with the buddy every frame is in exactly one place (a free block,
  a per-CPU list, a held source or one present page: test_buddy.check_buddy);
- shadows / swap entries only on non-present pages; swap in use == swapped pages <= swap size;
- pgsteal_{kswapd,direct} >= pgdemote_{kswapd,direct} (demotion counts as reclaim), nothing is
  demoted from a node without a lower tier or with demotion disabled, anon is never scanned on a
  node that can neither swap nor demote;
- pgpromote_success <= numa_pages_migrated <= pgmigrate_success, pgpromote_success only on
  top-tier nodes;
and a run is a function of its inputs: the same seed gives identical counters and state.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as hs

from simkit import CXL, DRAM, READ, STORE, counters, machine, make_sim, node_counter, run, seq
from test_buddy import check_buddy
from tierlab.core import state as st
from tierlab.core import tlb_hw as st_tlb
from tierlab.core.ops import OP_LOAD, OP_READ, OP_STORE, OP_STREAM, OP_SYSCALL_END, OP_WRITE
from tierlab.core.vmstat import VMSTAT_NAMES
from tierlab.errors import ConfigError
from tierlab.workloads.base import Chunk, Region

LOWER = 4000        # a third tier below CXL (memory_tier31)
IDX = {n: i for i, n in enumerate(VMSTAT_NAMES)}


# --------------------------------------------------------------------------------------------
# generation
# --------------------------------------------------------------------------------------------

def scenario_from_seed(seed, orders=(0,)):
    """A random scenario: machine, regions, knobs, tasks, access mix. Sizes are drawn relative to the
    machine so that most runs reclaim (spill, kswapd, direct reclaim, demotion, swap), and NUMA
    scanning knobs are shortened so hint faults happen within a few milliseconds of run time."""
    rng = np.random.default_rng(seed)
    pick = lambda seq: seq[int(rng.integers(0, len(seq)))]     # noqa: E731
    # one run in three is a plain DRAM + CXL tiering set-up: default policy, hint faults, promotion
    tiering = rng.random() < 1 / 3
    nn = 2 if tiering else int(rng.integers(1, 4))
    nodes = [(int(rng.integers(64, 257)), int(rng.integers(1, 3)), DRAM)]
    for _ in range(1, nn):
        nodes.append((int(rng.integers(64, 513)), 0 if tiering else pick([0, 0, 1]),
                      CXL if tiering else pick([DRAM, CXL, CXL, CXL, LOWER])))
    total = sum(n[0] for n in nodes)
    regions = []
    for i in range(int(rng.integers(1, 4))):
        kind = pick(["anon", "anon", "file", "file_mapped", "file_mapped"])
        pages = max(8, int(total * pick([0.05, 0.3, 0.7, 1.0, 1.5])) + int(rng.integers(0, 8)))
        order = pick(orders)
        if max(orders) > 0:     # keep every region (and so every base) a multiple of the largest folio
            pages = -(-pages >> max(orders)) << max(orders)
        policy = pick(["default", "default", "default", "bind0", "bind0", "bind", "preferred", "interleave"])
        if tiering:
            policy = pick(["default", "default", "default", "bind0"])
        rnodes = ()
        if policy == "bind0":
            policy, rnodes = "bind", (0,)
        elif policy != "default":
            rnodes = tuple(int(x) for x in rng.permutation(nn)[:int(rng.integers(1, nn + 1))])
            if policy == "preferred":
                rnodes = rnodes[:1]
        regions.append(Region(f"r{i}", "anon" if kind == "anon" else "file", pages, policy, rnodes,
                              order=order, mapped=kind == "file_mapped"))
    anon_total = sum(r.pages for r in regions if r.kind == "anon")
    swap = pick(["none", "enough", "enough", "enough", "small"])
    knobs = dict(
        demotion_enabled=pick([0, 1, 1]),
        swap_size={"none": 0, "enough": 2 * anon_total + 64, "small": 32}[swap],
        numa_balancing=pick([0, 1, 2, 2, 3]),
        lru_batch_size=pick([1, 4, 15, 31]),
        watermark_scale_factor=pick([10, 10, 200, 1000]),
        swappiness=int(rng.integers(0, 201)),
        pagecache_promotion_enabled=pick([0, 1]),
        scan_delay_ms=pick([0, 0, 0, 1, 1000]),
        scan_period_min_ms=pick([1, 1, 1, 10, 1000]),
        scan_size_mb=pick([1, 1, 256]),
        hot_threshold_ms=pick([1, 1000, 1000]),
        migrc=pick([0, 1]),
        migration_entry_ad=pick([0, 1, 1]),
        tlb_model=pick(["off", "set_assoc"]),
    )
    if tiering:
        knobs.update(numa_balancing=pick([2, 2, 3]), scan_delay_ms=0, scan_period_min_ms=1, scan_size_mb=1)
    nr_tasks = int(rng.integers(1, 4))
    lengths = [pick([20, 300, 1500, 3000, 8000]) + int(rng.integers(0, 50)) for _ in range(nr_tasks)]
    mix = dict(
        seed=int(rng.integers(0, 2**32)),
        p_seq=pick([0.0, 0.3, 0.7, 1.0]),
        p_write=pick([0.0, 0.1, 0.5, 1.0]),
        p_syscall_end=pick([1.0, 1.0, 0.5]),
        hot=pick([None, 0.1, 0.5]),
    )
    sim_seed = int(rng.integers(0, 1000))
    # drawn last, so the draws above (and the examples they give) stay as they were
    knobs.update(page_alloc_model=pick(["counts", "buddy"]),
                 anon_folio_orders=pick(["region", "region", "baseline-4k", "v1", "v2", "v2-simple-order", "mthp"]))
    policy_knobs = dict(arch_wants_pte_order=pick([2, 3, 4]),
                        huge_anon_orders_always=pick(["2M", "16K,64K", "16K,32K,64K,2M"]))
    if knobs["anon_folio_orders"] != "region":      # region reads neither, and refuses them
        knobs.update(policy_knobs)
    return nodes, regions, knobs, nr_tasks, lengths, mix, sim_seed


def scenarios(orders=(0,)):
    return hs.integers(0, 2**32 - 1).map(lambda seed: scenario_from_seed(seed, orders))


def accesses(regions, lengths, mix):
    """Per task: page ids and ops. Anon regions get LOAD/STORE, read()-only files READ/WRITE,
    mapped files any of the four; a `hot` fraction of each region takes most random accesses."""
    rng = np.random.default_rng(mix["seed"])
    bases = np.cumsum([0] + [r.pages for r in regions])
    out = []
    for n in lengths:
        reg = rng.integers(0, len(regions), size=n)
        pages = np.empty(n, np.int64)
        ops = np.empty(n, np.uint8)
        cursor = [0] * len(regions)
        for i in range(n):
            r = int(reg[i])
            size = regions[r].pages
            if rng.random() < mix["p_seq"]:
                off = cursor[r] % size
                cursor[r] += 1
                stream = OP_STREAM
            else:
                hot = mix["hot"]
                if hot is not None and rng.random() < 0.8:
                    off = int(rng.integers(0, max(1, int(size * hot))))
                else:
                    off = int(rng.integers(0, size))
                stream = 0
            pages[i] = bases[r] + off
            write = rng.random() < mix["p_write"]
            if regions[r].kind == "anon":
                kind = OP_STORE if write else OP_LOAD
            elif regions[r].mapped and rng.random() < mix.get("mapped_load", 0.5):
                kind = OP_STORE if write else OP_LOAD
            else:
                kind = OP_WRITE if write else OP_READ
            op = kind | stream
            if kind >= OP_READ and rng.random() < mix["p_syscall_end"]:
                op |= OP_SYSCALL_END
            ops[i] = op
        out.append((pages, ops))
    return out


def chunks_of(per_task, parts=2):
    """Split every task's accesses into `parts` consecutive chunks (CSR per chunk)."""
    res = []
    for k in range(parts):
        offs = [0]
        pp, oo = [], []
        for pages, ops in per_task:
            n = len(pages)
            lo, hi = n * k // parts, n * (k + 1) // parts
            pp.append(pages[lo:hi])
            oo.append(ops[lo:hi])
            offs.append(offs[-1] + hi - lo)
        res.append(Chunk(np.array(offs, np.int64), np.concatenate(pp), np.concatenate(oo)))
    return res


def check_tlbs(sim):
    """The CPUs' TLBs (tlb_hw.py): no translation a CPU can still use leads to a frame the page has
    left unless that frame is a source MIGRC holds and the translation is read-only; no page is
    reached through a stale translation after a writable mapping exists, or after its source was
    freed. Without MIGRC, no stale translation at all."""
    s = sim.state
    g = dict(zip(VMSTAT_NAMES, s.counters.sum(axis=0).tolist()))
    assert g["tlb_stale_write_hits"] == 0 and g["tlb_stale_freed_hits"] == 0
    hw = ("dtlb_load_misses", "dtlb_store_misses", "itlb_load_misses", "tlb_cpu_flush_all", "tlb_cpu_flush_one",
          "tlb_stale_hits")
    if sim.tlb_model == "off":
        assert all(g[k] == 0 for k in hw)
        return
    if not sim.kernel.migrc:
        assert g["tlb_stale_hits"] == 0
    t = s.tlbs
    held = s.pgdat["migrc_pending_nr"] + s.pgdat["migrc_batch_nr"]
    for cpu in range(t.tag.shape[0]):
        if t.need_flush[cpu]:
            continue                       # a lazy CPU flushes before it next translates
        for lvl in (st_tlb.DTLB, st_tlb.STLB):
            sets, ways = int(t.geo[lvl, 0]), int(t.geo[lvl, 1])   # a set's entries are valid while
            gen = np.full(t.tag.shape[2], -1, np.int64)            # its generation is the CPU's
            gen[:sets * ways] = np.repeat(t.set_gen[cpu, lvl, :sets], ways)
            live = (t.tag[cpu, lvl] >= 0) & (gen == t.cpu_gen[cpu])
            for i in np.flatnonzero(live).tolist():
                page = int(t.tag[cpu, lvl, i])
                o = int(s.pages.order[page]) & int(st.ORDER_MASK)
                head = page & ~((1 << o) - 1)
                f2 = int(s.pages.flags2[head])
                mapped = bool(f2 & int(st.F2_PRESENT)) and bool(f2 & int(st.F2_MAPPED)) \
                    and not (int(s.pages.flags[head]) & int(st.PG_PROTNONE))
                if mapped and int(s.pages.node[head]) == int(t.node[cpu, lvl, i]):
                    continue
                old = int(t.node[cpu, lvl, i])
                assert sim.kernel.migrc and held[old] > 0 and not t.wr[cpu, lvl, i], \
                    f"CPU {cpu} level {lvl}: a stale translation of page {page} (node {old})"
                assert not (f2 & int(st.F2_PTE_WRITE)) or not mapped, f"page {page}: writable with a stale translation"


def build(scn):
    nodes, regions, knobs, nr_tasks, lengths, mix, sim_seed = scn
    sim = make_sim(machine(*nodes), regions, nr_tasks=nr_tasks, seed=sim_seed, **knobs)
    return sim, chunks_of(accesses(regions, lengths, mix))


def run_chunk(sim, ch):
    try:
        sim.run(chunks=[ch])
    except ConfigError as e:
        if "out of memory" not in str(e):
            raise
        return False
    return True


# --------------------------------------------------------------------------------------------
# invariants
# --------------------------------------------------------------------------------------------

def walk(s, sent, limit):
    out = []
    x = int(s.pages.next[sent])
    while x != sent:
        assert 0 <= x < limit, f"list {sent} links to {x}"
        assert int(s.pages.next[int(s.pages.prev[x])]) == x, f"prev/next mismatch at {x}"
        out.append(x)
        x = int(s.pages.next[x])
        assert len(out) <= limit, f"list {sent} does not return to its sentinel"
    assert int(s.pages.prev[sent]) == (out[-1] if out else sent)
    return out


def nr_pages(s, head):
    return 1 << (int(s.pages.order[head]) & 15)


def check_invariants(sim):
    s, p = sim.state, sim.p
    P = s.pages.node.shape[0]
    N = s.pgdat["free"].shape[0]
    T = s.task["promo_count"].shape[0]
    where = {}
    isolated = np.zeros(N, np.int64)
    for nid in range(N):
        for lru in range(st.NR_LRU_LISTS):
            total = 0
            for x in walk(s, st.lru_sentinel(s, nid, lru), P):
                assert x not in where, f"folio {x} on two lists: {where[x]} and lru {nid},{lru}"
                where[x] = ("lru", nid, lru)
                assert s.pages.flags2[x] & st.F2_PRESENT, f"non-present folio {x} on lru {nid},{lru}"
                assert int(s.pages.node[x]) == nid
                assert int(st.folio_lru(s, x)) == lru, f"folio {x} flags select another list than {lru}"
                assert s.pages.flags[x] & st.PG_LRU
                assert not (s.pages.flags[x] & st.PG_ISOLATED) and not (s.pages.flags2[x] & st.F2_BATCHED)
                total += nr_pages(s, x)
            if not int(s.lruvec["lru_gen_enabled"][nid]):
                assert int(s.lruvec["lru_size"][nid, lru]) == total, f"lru_size[{nid},{lru}]"
            else:
                assert total == 0, f"folios on classic list {nid},{lru} with lru_gen on"
        check_lru_gen(s, nid, where, P)
    for cpu in range(s.cpu["lru_batch_len"].shape[0]):
        for i in range(int(s.cpu["lru_batch_len"][cpu])):
            x = int(s.cpu["lru_batch"][cpu, i])
            assert x not in where, f"batched folio {x} also {where[x]}"
            where[x] = ("batch", cpu)
            assert s.pages.flags2[x] & st.F2_PRESENT and s.pages.flags2[x] & st.F2_BATCHED
            assert not (s.pages.flags[x] & st.PG_LRU)
    for t in range(T):
        promo = 0
        for x in walk(s, st.promo_sentinel(s, t), P):
            assert x not in where, f"isolated folio {x} also {where[x]}"
            where[x] = ("promo", t)
            assert s.pages.flags2[x] & st.F2_PRESENT and s.pages.flags[x] & st.PG_ISOLATED
            assert not (s.pages.flags[x] & st.PG_LRU)
            isolated[int(s.pages.node[x])] += nr_pages(s, x)
            promo += nr_pages(s, x)
        assert promo == int(s.task["promo_count"][t]), f"task {t}: promo_count {int(s.task['promo_count'][t])}, {promo} pages listed"
    assert s.pgdat["nr_isolated"].tolist() == isolated.tolist()

    present = (s.pages.flags2 & st.F2_PRESENT) != 0
    heads = np.flatnonzero(present)
    for x in heads.tolist():
        assert x in where, f"present folio {x} is on no list, batch or promotion list"
    lru_flag = np.flatnonzero(s.pages.flags & st.PG_LRU).tolist()
    assert sorted(lru_flag) == sorted(x for x, w in where.items() if w[0] == "lru")
    # a folio belongs to one mapping: it lies inside one region and has that region's kind
    rs = s.regions.start
    for x in heads.tolist():
        r = int(np.searchsorted(rs, x, side="right")) - 1
        assert x + nr_pages(s, x) <= int(rs[r + 1]), f"folio {x} (+{nr_pages(s, x)}) crosses the end of region {r}"
        assert bool(s.pages.flags2[x] & st.F2_ANON) == (int(s.regions.kind[r]) == st.REGION_ANON)
    used = np.zeros(N, np.int64)
    for x in heads.tolist():
        used[int(s.pages.node[x])] += nr_pages(s, x)
    assert (s.pgdat["free"] >= 0).all(), f"negative free: {s.pgdat['free']}"
    # MIGRC's held sources are neither free nor a page's: freed exactly once, at a covering flush
    held = s.pgdat["migrc_pending_nr"]
    assert (held >= 0).all() and (s.pgdat["migrc_batch_nr"] == 0).all()
    # with the buddy, NR_FREE_PAGES leaves out the pages on the CPUs' lists (buddy.py)
    pcp = s.buddy.pcp_count.sum(axis=0)
    assert (s.pgdat["free"] + pcp + used + held).tolist() == s.pgdat["managed"].tolist()
    if sim.page_alloc_model == "buddy":
        check_buddy(s)
    assert (s.counters >= 0).all(), [VMSTAT_NAMES[i] for i in np.flatnonzero((s.counters < 0).any(axis=0))]

    shadow = (s.pages.flags2 & (st.F2_SHADOW | st.F2_SWAPPED)) != 0
    assert not (shadow & present).any(), "shadow or swap entry on a present page"
    swapped = sum(nr_pages(s, x) for x in np.flatnonzero(s.pages.flags2 & st.F2_SWAPPED).tolist())
    assert swapped == int(s.sys[0]["nr_swap_used"])
    assert swapped <= int(sim.kernel.swap_size)
    assert not ((s.pages.flags2 & st.F2_SWAPPED) != 0)[(s.pages.flags2 & st.F2_ANON) == 0].any()

    c = s.counters
    for kind in ("kswapd", "direct"):
        assert (c[:, IDX[f"pgsteal_{kind}"]] >= c[:, IDX[f"pgdemote_{kind}"]]).all()
    g = c.sum(axis=0)
    assert g[IDX["pgpromote_success"]] <= g[IDX["numa_pages_migrated"]] <= g[IDX["pgmigrate_success"]]
    demoted = g[IDX["pgdemote_kswapd"]] + g[IDX["pgdemote_direct"]]
    assert g[IDX["pgmigrate_success"]] >= demoted + g[IDX["numa_pages_migrated"]]   # both are migrations
    # every scanned / reclaimed page is counted once by reclaimer and once by type
    for what in ("pgscan", "pgsteal"):
        assert (c[:, IDX[f"{what}_kswapd"]] + c[:, IDX[f"{what}_direct"]]
                == c[:, IDX[f"{what}_anon"]] + c[:, IDX[f"{what}_file"]]).all(), what
    assert (c[:, IDX["pgsteal_anon"]] <= c[:, IDX["pgscan_anon"]]).all()
    assert (c[:, IDX["pgsteal_file"]] <= c[:, IDX["pgscan_file"]]).all()
    # workingset: activation only for refaults, restore only for activations
    for typ in ("anon", "file"):
        assert g[IDX[f"workingset_restore_{typ}"]] <= g[IDX[f"workingset_activate_{typ}"]] \
            <= g[IDX[f"workingset_refault_{typ}"]]
    assert g[IDX["pswpin"]] <= g[IDX["pswpout"]]
    assert g[IDX["numa_hint_faults_local"]] <= g[IDX["numa_hint_faults"]]
    # TLB (tlb.py): a remote flush reaches at most every other CPU slot (none when they are all lazy:
    # running kswapd, or idle)
    nr_cpus = s.cpu.shape[0]
    assert g[IDX["nr_tlb_remote_flush_received"]] <= g[IDX["nr_tlb_remote_flush"]] * max(0, nr_cpus - 1)
    check_tlbs(sim)
    # pages allocated minus pages freed on a node are the pages in use there
    assert (c[:, IDX["pgalloc"]] - c[:, IDX["pgfree"]]).tolist() == (used + s.pgdat["migrc_pending_nr"]).tolist()
    for nid in range(N):
        can_demote = bool(sim.kernel.demotion_enabled) and int(s.demote_target[nid, 0]) >= 0
        if not can_demote:
            assert c[nid, IDX["pgdemote_kswapd"]] == c[nid, IDX["pgdemote_direct"]] == 0
        if not can_demote and sim.kernel.swap_size == 0:
            assert c[nid, IDX["pgscan_anon"]] == 0 and c[nid, IDX["pgsteal_anon"]] == 0
        if int(s.pgdat["tier"][nid]) != 0 and not sim.kernel.pagecache_promotion_enabled:
            # migrate_misplaced_folio() counts PGPROMOTE_SUCCESS only for a top-tier destination
            # (the page-cache RFC's migrate_misplaced_folio_batch() counts every success)
            assert c[nid, IDX["pgpromote_success"]] == 0, "promotion into a node that is not top tier"
    return where


def folio_gen(s, x):
    """The MGLRU generation slot in bits 4-5 of `order` (state.py)."""
    return (int(s.pages.order[x]) & 0xFF) >> 4 & 3


def check_lru_gen(s, nid, where, P):
    """MGLRU's lists of node nid: every folio on one list, present, PG_lru; pages per generation
    (from each folio's generation bits: a folio whose generation was raised lazily may still sit in
    an older list) equal nr_pages, whose sum is the LRU size of the active/inactive emulation;
    min_seq <= max_seq within MIN_NR_GENS..MAX_NR_GENS generations, and every folio's generation
    inside that window."""
    lv = s.lruvec[nid]
    max_seq = int(lv["max_seq"])
    per_gen = np.zeros((st.MAX_NR_GENS, st.ANON_AND_FILE), np.int64)
    for gen in range(st.MAX_NR_GENS):
        for typ in range(st.ANON_AND_FILE):
            for x in walk(s, st.lru_gen_sentinel(s, nid, gen, typ), P):
                assert int(lv["lru_gen_enabled"]), f"folio {x} on a generation list of a classic lruvec"
                assert x not in where, f"folio {x} on two lists: {where[x]} and gen {nid},{gen},{typ}"
                where[x] = ("lru", nid, gen, typ)
                assert s.pages.flags2[x] & st.F2_PRESENT and int(s.pages.node[x]) == nid
                assert s.pages.flags[x] & st.PG_LRU
                assert not (s.pages.flags[x] & (st.PG_ISOLATED | st.PG_ACTIVE))
                assert (0 if s.pages.flags2[x] & st.F2_ANON else 1) == typ
                window = [q % st.MAX_NR_GENS for q in range(int(lv["min_seq"][typ]), max_seq + 1)]
                assert folio_gen(s, x) in window, f"folio {x}: generation {folio_gen(s, x)} outside {window}"
                per_gen[folio_gen(s, x), typ] += nr_pages(s, x)
    assert per_gen.tolist() == lv["nr_pages"].tolist(), f"nr_pages of node {nid}"
    if int(lv["lru_gen_enabled"]):
        assert int(lv["lru_size"].sum()) == int(per_gen.sum())
    for typ in range(st.ANON_AND_FILE):
        nr_gens = max_seq - int(lv["min_seq"][typ]) + 1
        assert st.MIN_NR_GENS <= nr_gens <= st.MAX_NR_GENS, f"node {nid} type {typ}: {nr_gens} generations"


def state_snapshot(sim):
    """Every array of the state, by its dotted name (pages.flags, pgdat, ...)."""
    return {k: a.copy() for k, a in st.state_arrays(sim.state)}


# --------------------------------------------------------------------------------------------
# properties
# --------------------------------------------------------------------------------------------

@settings(deadline=None)
@given(scenarios())
def test_state_invariants(scn):
    sim, chunks = build(scn)
    check_invariants(sim)
    for ch in chunks:
        ok = run_chunk(sim, ch)
        check_invariants(sim)
        assume(ok)


@settings(deadline=None)
@given(scenarios())
def test_same_seed_same_run(scn):
    a, chunks = build(scn)
    b, _ = build(scn)
    ok_a = all(run_chunk(a, ch) for ch in chunks)
    ok_b = all(run_chunk(b, ch) for ch in chunks)
    assert ok_a == ok_b
    assume(ok_a)
    sa, sb = state_snapshot(a), state_snapshot(b)
    for k in sa:
        assert np.array_equal(sa[k], sb[k]), k
    assert counters(a) == counters(b)


@settings(deadline=None, max_examples=15)
@given(scenarios(orders=(2,)))
def test_state_invariants_large_folios(scn):
    sim, chunks = build(scn)
    for ch in chunks:
        ok = run_chunk(sim, ch)
        check_invariants(sim)
        assume(ok)


@hs.composite
def page_cache_scenarios(draw):
    """Only page cache (read() or mmap), on nodes large enough that the per-CPU lru_add batches are
    a small part of them: all of it is reclaimable, so no allocation may fail."""
    cap = draw(hs.sampled_from([256, 1024, 2048]))
    nodes = [(cap, 1, DRAM)]
    if draw(hs.booleans()):
        nodes.append((draw(hs.sampled_from([256, 4096])), 0, CXL))
    regions = []
    for i in range(draw(hs.integers(1, 2))):
        mapped = draw(hs.sampled_from([True, True, False]))
        policy = draw(hs.sampled_from(["default", "bind"]))
        regions.append(Region(f"f{i}", "file", cap * draw(hs.sampled_from([1, 2, 3])), policy,
                              (0,) if policy == "bind" else (), mapped=mapped))
    knobs = dict(demotion_enabled=int(draw(hs.booleans())), numa_balancing=draw(hs.sampled_from([0, 2])),
                 lru_batch_size=draw(hs.sampled_from([1, 15, 31])))
    lengths = [cap * draw(hs.sampled_from([2, 3]))]
    mix = dict(seed=draw(hs.integers(0, 2**32 - 1)), p_seq=draw(hs.sampled_from([0.9, 1.0])),
               p_write=draw(hs.sampled_from([0.0, 0.2])), p_syscall_end=1.0, hot=None,
               mapped_load=draw(hs.sampled_from([0.5, 1.0])))
    return nodes, regions, knobs, 1, lengths, mix, 0


STREAMING_MMAP = ([(1024, 1, DRAM)], [Region("f0", "file", 3072, mapped=True)],
                  dict(demotion_enabled=0, numa_balancing=0, lru_batch_size=1), 1, [3072],
                  dict(seed=1, p_seq=1.0, p_write=0.0, p_syscall_end=1.0, hot=None, mapped_load=1.0), 0)


@settings(deadline=None, max_examples=20)
@given(page_cache_scenarios())
@example(STREAMING_MMAP)
def test_page_cache_alone_never_ooms(scn):
    sim, chunks = build(scn)
    for ch in chunks:
        assert run_chunk(sim, ch), "out of memory with only page cache resident"
        check_invariants(sim)


# --------------------------------------------------------------------------------------------
# NUMA balancing and memory policies
# --------------------------------------------------------------------------------------------

def test_explicit_policy_regions_are_not_numa_scanned():
    m = machine((256, 1, DRAM), (1024, 0, CXL))
    sim = make_sim(m, [Region("a", "anon", 64, "bind", (1,))], lru_batch_size=1, numa_balancing=2,
                   scan_delay_ms=0, scan_period_min_ms=1, scan_size_mb=1)
    run(sim, seq(list(range(64)) * 400, STORE))
    c = counters(sim)
    assert c["numa_pte_updates"] == 0 and c["numa_hint_faults"] == 0
    assert c["pgpromote_success"] == 0 and c["numa_pages_migrated"] == 0
    assert int(sim.state.pgdat["free"][1]) == 1024 - 64


def test_default_policy_region_is_numa_scanned_and_promoted():
    """Control for the test above: a default-policy (MOF|MORON) region that spilled to the CXL node
    because node 0 was at LOW is scanned, hint-faulted and promoted (after the failed
    migrate_balanced_pgdat() check wakes kswapd on node 0 to make room)."""
    m = machine((256, 1, DRAM), (1024, 0, CXL))
    sim = make_sim(m, [Region("cache", "file", 216, "bind", (0,)), Region("b", "anon", 64)],
                   lru_batch_size=1, min_free_kbytes=640, numa_balancing=0, scan_delay_ms=0, scan_period_min_ms=1,
                   scan_size_mb=1)
    s = sim.state
    assert s.pgdat["tier"].tolist() == [0, 1]
    run(sim, seq(range(216), READ))                     # node 0 down to LOW (40) with page cache
    run(sim, seq(range(216, 280), STORE))               # b spills to node 1
    assert all(int(s.pages.node[p]) == 1 for p in range(216, 280))
    sim.set_knobs(numa_balancing=2)
    run(sim, seq(list(range(216, 280)) * 2000, STORE))     # scans at scheduler ticks (4 ms)
    c = counters(sim)
    assert c["numa_pte_updates"] > 0 and c["numa_hint_faults"] > 0
    assert c["pgpromote_success"] > 0
    assert sum(int(s.pages.node[p]) == 0 for p in range(216, 280)) == c["pgpromote_success"]
    check_invariants(sim)


def test_migration_between_lower_tier_nodes_is_not_a_promotion():
    # node 1 is a CXL node with a CPU: the top tier is node 0's (DRAM), so nodes 1 and 2 are both tier 1
    m = machine((64, 1, DRAM), (64, 1, CXL), (512, 0, CXL))
    sim = make_sim(m, [Region("a", "anon", 200)], nr_tasks=2, lru_batch_size=1, swap_size=1024,
                   scan_delay_ms=0, scan_period_min_ms=1, scan_size_mb=1)
    s = sim.state
    assert s.pgdat["tier"].tolist() == [0, 1, 1] and s.cpu["node"][s.task["cpu"][1]] == 1
    run(sim, [], seq(range(200), STORE))        # task 1 (on node 1): zonelist 1, 0, 2
    far = [p for p in range(200) if int(s.pages.node[p]) == 2]
    assert far
    sim.set_knobs(numa_balancing=2)
    # task 1 is the process's second thread: init_numa_balancing staggers its first scan tick by
    # ~8 ms of runtime, so it runs long enough to get past that
    run(sim, [], seq(far * 3000, STORE))
    c = counters(sim)
    assert c["numa_hint_faults"] > 0
    assert c["numa_pages_migrated"] > 0         # hot CXL folios moved to the faulting CPU's node 1
    assert node_counter(sim, 0, "numa_pages_migrated") == 0
    assert c["pgpromote_success"] == 0          # ... but node 1 is not top tier: not a promotion
    check_invariants(sim)
