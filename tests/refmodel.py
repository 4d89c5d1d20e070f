"""A naive, step-by-step reference model of the classic LRU, reclaim with demotion and the tiering
promotion decision, in plain Python (lists and dicts, one entry per page), written from the kernel's
logic as the engine's docstrings describe it (mm/swap.c, mm/workingset.c, mm/vmscan.c,
mm/page_alloc.c, mm/migrate.c, kernel/sched/fair.c should_numa_migrate_memory(), the page-cache
promotion RFC). Readable rather than fast; tests/test_refmodel.py compares it with the engine.

The regime in which the comparison is exact: every time-model cost is 0 (all COSTS, and per-node
seq/line/write ns), so no clock decides anything:
- accesses cost nothing, so only kswapd moves clocks (one SWAP_CLUSTER_MAX batch per step, +100 ns
  each); the engine runs the CPU that is ready first (lowest number on ties). Each kswapd runs on
  the CPU core/sched.place_kswapds gives it (one of its own after the tasks' CPUs, or shared with
  tasks). On a CPU, CFS as sched.py models it: tasks keep vruntime 0 (their slices never run
  out), so they run their chunk parts one after another in enqueue order; a task stops after an
  access that woke a kswapd (the engine re-picks); a woken kswapd gets min_vruntime - latency/2
  and preempts a task more than wakeup_granularity ahead of it, the task going behind the CPU's
  other tasks; a kswapd runs its slices by vruntime; a CPU that ran kswapd is ahead of the CPUs
  still at its old clock, so they run first;
- the folio access time and "now" are 0 ms: the hint-fault latency of a folio never stamped is
  (0 - PAGE_ACCESS_TIME_MASK) & mask = 1, then 0; the 1 s rate-limit window and the
  threshold-adjustment period never roll over, so the rate limit counts candidates from the start;
- the NUMA scanner never runs (task runtime stays 0 < its scan period), so there are no hint faults:
  promotion is exercised through the page-cache path (pagecache_promotion_enabled).
Hint-fault promotion, loaded latency and everything clock-driven are not covered here; the golden
counters and the property tests cover them.
"""
from __future__ import annotations

from collections import defaultdict

from tierlab.core.sched import place_kswapds
from tierlab.core.vmstat import VMSTAT_NAMES

M64 = (1 << 64) - 1
STAMP_NONE = 0xFFFFFFFF
SWAP_CLUSTER_MAX = 32
MAX_RECLAIM_RETRIES = 16

# flags
REFERENCED, ACTIVE, WORKINGSET, LRU, DIRTY, YOUNG, PROTNONE, ISOLATED = 1, 2, 4, 8, 16, 32, 64, 128
# flags2
PRESENT, ANON, MAPPED, SHADOW, SWAPPED, CONTIG, BATCHED, PTE_WRITE = 1, 2, 4, 8, 16, 32, 64, 128
# ops
LOAD, STORE, READ, WRITE, KIND, STREAM, SYSCALL_END = 0, 1, 2, 3, 3, 4, 8
# lists
INACTIVE_ANON, ACTIVE_ANON, INACTIVE_FILE, ACTIVE_FILE = 0, 1, 2, 3
WMIN, WLOW, WHIGH, WPROMO = 0, 1, 2, 3
POLICIES = {"default": 0, "preferred": 1, "bind": 2, "interleave": 3}


class OutOfMemory(Exception):
    pass


class RefModel:
    """machine: a tierlab Machine; regions: Region list; knobs: Kernel knob values (resolved);
    wmarks: per node (min, low, high, promo); managed: per node pages."""

    def __init__(self, machine, regions, knobs, nr_tasks, seed, wmarks, managed):
        self.N = machine.nr_nodes
        self.tier = list(machine.tier_index())
        self.zonelist = [list(z) for z in machine.zonelists()]
        self.demote_targets = [list(t) for t in machine.demotion_targets()]
        cpu_nodes = machine.cpu_nodes()
        C = max(1, min(len(cpu_nodes), nr_tasks))
        self.task_cpu = [t % C for t in range(nr_tasks)]         # the first CPUs, as config places them
        self.kswapd_cpu, self.cpu_node = place_kswapds(cpu_nodes, list(range(C)), self.task_cpu,
                                                       [nd.cpus for nd in machine.nodes], machine.zonelists())
        self.cpu_clock = [0] * len(self.cpu_node)
        self.ra_adding = (0, 0)       # sys.ra_add_*: folios the readahead under way added (reclaim keeps them)
        self.latest = 0                      # sys.now: the latest clock a task's quantum reached
        self.mm_cpus = set()          # mm_cpumask(): the CPUs that ran the (one) mm's tasks
        self.sender = 0               # smp_processor_id() of the reclaim or promotion work in progress
        self.rq = [{} for _ in self.cpu_node]       # per CPU: enqueued entity ("t", t) / ("k", nid) -> seq
        self.rq_seq = [0] * len(self.cpu_node)
        self.curr = [None] * len(self.cpu_node)
        # x86 TLB generations (tlb.py): the mm's, and per CPU the one its TLB is at (None: it has not
        # run the mm yet) and whether it ran a kswapd since (lazy: it catches up when it returns)
        self.mm_gen = 0
        self.cpu_gen = [None] * len(self.cpu_node)
        self.cpu_lazy = [False] * len(self.cpu_node)
        # CFS: vruntime and runtime per entity (tasks never run up either: accesses cost 0);
        # kswapd has slept since boot
        self.vr = {("t", t): 0 for t in range(nr_tasks)} | {("k", n): -(1 << 60) for n in range(machine.nr_nodes)}
        self.runtime = {e: 0 for e in self.vr}
        self.min_vruntime = [0] * len(self.cpu_node)
        self.slice_start = [0] * len(self.cpu_node)
        # the CFS tunables at their defaults, times update_sysctl()'s 1 + ilog2(min(CPUs, 8))
        factor = 1 + (min(machine.nr_cpus, 8).bit_length() - 1)
        self.sched_latency = 6_000_000 * factor
        self.sched_min_gran = 750_000 * factor
        self.sched_gran = 1_000_000 * factor                        # wakeup_granularity
        self.now = 0
        self.T = nr_tasks
        self.k = dict(knobs)
        self.wmark = [list(w) for w in wmarks]
        self.managed = list(managed)
        self.free = list(managed)
        self.regions = []
        start = 0
        for r in regions:
            kind = "anon" if r.kind == "anon" else ("mapped" if r.mapped else "file")
            self.regions.append(dict(start=start, end=start + r.pages, kind=kind, policy=r.policy,
                                     nodes=list(r.nodes), order=r.order, advice=r.advice))
            start += r.pages
        P = start
        self.node = [-1] * P
        self.flags = [0] * P
        self.flags2 = [0] * P
        self.order = [0] * P
        self.stamp = [STAMP_NONE] * P
        self.lru = [[[] for _ in range(4)] for _ in range(self.N)]   # index 0 = head (newest)
        self.batch = [[] for _ in self.cpu_node]
        self.promo = [[] for _ in range(nr_tasks)]
        self.promo_count = [0] * nr_tasks
        self.last_page = [-2] * nr_tasks
        self.call_start = [1] * nr_tasks
        self.ra = [dict(file=-1, start=0, size=0, async_size=0, mark=-1) for _ in range(nr_tasks)]
        self.prev_pos = [-1] * nr_tasks
        self.req = [0] * nr_tasks
        self.counters = [defaultdict(int) for _ in range(self.N)]
        self.nonresident_age = [0] * self.N
        self.refault_snap = [[0, 0] for _ in range(self.N)]
        self.scan_acc = [0.0] * self.N
        self.deact_acc = [[0.0, 0.0] for _ in range(self.N)]
        self.kswapd_awake = [False] * self.N
        self.kswapd_clock = [0] * self.N
        self.kswapd_failures = [0] * self.N
        self.kswapd_scanned = [0] * self.N
        self.last_alloc = [-2] * self.N
        self.nr_isolated = [0] * self.N
        self.swap_used = 0
        self.wakeups = 0
        # pglist_data promotion state: rate-limit window start/count, threshold, adjust start/count
        self.nbp = [dict(rl_start=0, rl_nr_cand=0, threshold=0, th_start=0, th_nr_cand=0) for _ in range(self.N)]
        self.rng = ((seed * 0x9E3779B97F4A7C15) | 1) & M64

    # ---- small helpers ------------------------------------------------------------------------
    def count(self, nid, name, n=1):
        self.counters[nid][name] += n

    def nr(self, head):
        return 1 << self.order[head]

    def head_of(self, page):
        return page & ~((1 << self.order[page]) - 1)

    def region_of(self, page):
        for i, r in enumerate(self.regions):
            if r["start"] <= page < r["end"]:
                return i
        raise IndexError(page)

    def lru_pages(self, nid, lru):
        return sum(self.nr(x) for x in self.lru[nid][lru])

    def node_lru_pages(self, nid):
        return sum(self.lru_pages(nid, i) for i in range(4))

    def tiering(self):
        return (int(self.k["numa_balancing"]) & 2) != 0

    def rng_next(self):
        x = self.rng
        x ^= x >> 12
        x ^= (x << 25) & M64
        x ^= x >> 27
        self.rng = x
        return ((x * 2685821657736338717) & M64) >> 11

    # ---- page allocator -----------------------------------------------------------------------
    def balanced(self, nid):
        return self.free[nid] >= self.wmark[nid][WPROMO if self.tiering() else WHIGH]

    def wakeup_kswapd(self, nid, now):
        if self.kswapd_awake[nid] or self.kswapd_failures[nid] >= MAX_RECLAIM_RETRIES or self.balanced(nid):
            return
        self.kswapd_awake[nid] = True
        self.count(nid, "pageoutrun")
        self.wakeups += 1
        self.kswapd_clock[nid] = max(self.kswapd_clock[nid], now)

    def watermark_ok(self, nid, nr, mark):
        return self.free[nid] - nr >= self.wmark[nid][mark]

    def policy_nodes(self, r, cpu_nid, index):
        reg = self.regions[r]
        start = cpu_nid
        if reg["policy"] == "preferred":
            start = reg["nodes"][0]
        elif reg["policy"] == "interleave":
            start = reg["nodes"][index % len(reg["nodes"])]
        out = list(self.zonelist[start])
        if reg["policy"] == "bind":
            out = [n for n in out if n in reg["nodes"]]
        return out

    def take_pages(self, nid, head, nr):
        self.free[nid] -= nr
        for i in range(nr):
            self.node[head + i] = nid
        if self.last_alloc[nid] == head - 1:
            self.flags2[head] |= CONTIG
        else:
            self.flags2[head] &= ~CONTIG
        self.last_alloc[nid] = head + nr - 1
        self.count(nid, "pgalloc", nr)

    def free_folio(self, head):
        self.free[self.node[head]] += self.nr(head)
        self.count(self.node[head], "pgfree", self.nr(head))

    def alloc_folio(self, r, cpu, head, nr):
        cpu_nid = self.cpu_node[cpu]
        cands = self.policy_nodes(r, cpu_nid, head - self.regions[r]["start"])
        for n in cands:
            if self.watermark_ok(n, nr, WLOW):
                return n
        for n in cands:
            self.wakeup_kswapd(n, self.now)
        nid = next((n for n in cands if self.watermark_ok(n, nr, WMIN)), -1)
        retries = 0
        while nid < 0 and retries < MAX_RECLAIM_RETRIES:
            if retries == 0:
                self.lru_add_drain_cpu(cpu)
            self.count(cpu_nid, "allocstall")
            self.sender = cpu
            got = self.direct_reclaim(cands)
            nid = next((n for n in cands if self.watermark_ok(n, nr, WMIN)), -1)
            if got == 0:
                break
            retries += 1
        if nid < 0:
            self.count(cpu_nid, "oom_kill")
        return nid

    # ---- LRU (mm/swap.c, mm/workingset.c) ----------------------------------------------------
    def folio_lru(self, head):
        return (0 if self.flags2[head] & ANON else 2) + (1 if self.flags[head] & ACTIVE else 0)

    def lruvec_add(self, head):
        self.lru[self.node[head]][self.folio_lru(head)].insert(0, head)
        self.flags[head] |= LRU

    def lruvec_del(self, head):
        self.lru[self.node[head]][self.folio_lru(head)].remove(head)
        self.flags[head] &= ~LRU

    def lru_add_drain_cpu(self, cpu):
        for h in self.batch[cpu]:
            self.flags2[h] &= ~BATCHED
            self.lruvec_add(h)
        self.batch[cpu] = []

    def folio_add_lru(self, cpu, head):
        self.flags2[head] |= BATCHED
        self.batch[cpu].append(head)
        if len(self.batch[cpu]) >= self.k["lru_batch_size"] or self.nr(head) > 1:
            self.lru_add_drain_cpu(cpu)

    def folio_mark_accessed(self, head):
        """True when already referenced and active (where the promotion hook sits)."""
        f = self.flags[head]
        if not f & REFERENCED:
            self.flags[head] |= REFERENCED
            return False
        if not f & ACTIVE:
            if f & LRU:                      # folio_activate()
                self.lruvec_del(head)
                self.flags[head] |= ACTIVE
                self.lruvec_add(head)
                self.count(self.node[head], "pgactivate", self.nr(head))
            elif self.flags2[head] & BATCHED:
                self.flags[head] |= ACTIVE   # __lru_cache_activate_folio()
            self.flags[head] &= ~REFERENCED
            self.nonresident_age[self.node[head]] += self.nr(head)   # workingset_activation()
            return False
        return True

    def can_swap(self):
        return self.swap_used < self.k["swap_size"]

    def workingset_eviction(self, head):
        nid, nr = self.node[head], self.nr(head)
        age = self.nonresident_age[nid] & 0xFFFFFFFF
        self.nonresident_age[nid] += nr
        mark = SWAPPED if self.flags2[head] & ANON else SHADOW
        ws = self.flags[head] & WORKINGSET
        for i in range(nr):
            self.stamp[head + i] = age
            self.flags2[head + i] |= mark
            self.flags[head + i] = ws
            self.order[head + i] = 0

    def workingset_refault(self, head, new_nid, evict_nid):
        nr = self.nr(head)
        anon = bool(self.flags2[head] & ANON)
        typ = "anon" if anon else "file"
        had_ws = bool(self.flags[head] & WORKINGSET)
        self.flags[head] &= ~WORKINGSET
        self.count(new_nid, f"workingset_refault_{typ}", nr)
        distance = ((self.nonresident_age[evict_nid] & 0xFFFFFFFF) - self.stamp[head]) & 0xFFFFFFFF
        ws = self.lru_pages(evict_nid, ACTIVE_FILE)
        if anon:
            ws += self.lru_pages(evict_nid, INACTIVE_FILE)
        if self.can_swap():
            ws += self.lru_pages(evict_nid, ACTIVE_ANON)
            if not anon:
                ws += self.lru_pages(evict_nid, INACTIVE_ANON)
        if distance > ws:
            return
        self.flags[head] |= ACTIVE
        self.nonresident_age[evict_nid] += nr
        self.count(new_nid, f"workingset_activate_{typ}", nr)
        if had_ws:
            self.flags[head] |= WORKINGSET
            self.count(new_nid, f"workingset_restore_{typ}", nr)

    def inactive_is_low(self, nid, file):
        base = 2 if file else 0
        inactive, active = self.lru_pages(nid, base), self.lru_pages(nid, base + 1)
        gb = (inactive + active) >> 18
        ratio = int((10.0 * gb) ** 0.5) if gb > 0 else 1
        return inactive * ratio < active

    # ---- reclaim (mm/vmscan.c) ----------------------------------------------------------------
    def can_demote(self, nid):
        return bool(self.k["demotion_enabled"]) and len(self.demote_targets[nid]) > 0

    def shrink_active_list(self, nid, lru, nr_to_scan):
        scanned = 0
        lst = self.lru[nid][lru]
        while scanned < nr_to_scan and lst:
            x = lst[-1]
            self.lruvec_del(x)
            scanned += self.nr(x)
            self.flags[x] = (self.flags[x] & ~(ACTIVE | YOUNG)) | WORKINGSET
            self.lruvec_add(x)
            self.count(nid, "pgdeactivate", self.nr(x))
        self.count(nid, "pgrefill", scanned)

    def folio_check_references(self, x):
        f = self.flags[x]
        young = bool(f & YOUNG) and bool(self.flags2[x] & MAPPED)
        ref = bool(f & REFERENCED)
        f &= ~(YOUNG | REFERENCED)
        if young:
            self.flags[x] = f | REFERENCED
            return "activate" if ref else "keep"
        self.flags[x] = f
        return "reclaim_clean" if ref and not self.flags2[x] & ANON else "reclaim"

    def move_isolated_folio(self, x, dst):
        src, nr = self.node[x], self.nr(x)
        self.free[src] += nr
        self.count(src, "pgfree", nr)
        self.take_pages(dst, x, nr)
        self.flags[x] &= ~ISOLATED
        self.lruvec_add(x)
        self.count(dst, "pgmigrate_success", nr)

    def demote_folio(self, nid, x, now):
        nr = self.nr(x)
        targets = self.demote_targets[nid]
        if not targets:
            return 0
        dst = targets[self.rng_next() % len(targets)]
        if not self.watermark_ok(dst, nr, WMIN):
            self.wakeup_kswapd(dst, now)
            dst = next((c for c in range(self.N) if self.tier[c] > self.tier[nid]
                        and self.watermark_ok(c, nr, WMIN)), -1)
            if dst < 0:
                self.count(nid, "pgmigrate_fail", nr)
                return 0
        elif self.free[dst] - nr < self.wmark[dst][WLOW]:
            self.wakeup_kswapd(dst, now)
        self.flags[x] |= ISOLATED
        self.move_isolated_folio(x, dst)
        return nr

    def reclaim_folio(self, nid, x):
        nr = self.nr(x)
        if self.flags2[x] & ANON:
            if self.swap_used + nr > self.k["swap_size"]:
                return 0
            self.swap_used += nr
            self.count(nid, "pswpout", nr)
        elif self.flags[x] & DIRTY:
            self.count(nid, "pgpgout", 4 * nr)
        self.free_folio(x)
        self.flags2[x] &= ~(PRESENT | MAPPED | PTE_WRITE)
        self.workingset_eviction(x)
        return nr

    # ---- TLB flushes (arch/x86/mm/tlb.c, mm/rmap.c's unmap batch) ------------------------------
    def lazy(self, c):
        """The CPU runs a kswapd, or is idle (no task of its own: one whose chunk part is done
        still counts as running), so lazy TLB mode, skipped by shootdowns."""
        if self.curr[c] is not None:
            return self.curr[c][0] != "t"
        return c not in self.task_cpu

    def switch_mm(self, c):
        """A context switch on CPU c to its new curr: a kswapd leaves it lazy; a task brings it to
        the mm's generation when it had not run the mm or was lazy."""
        e = self.curr[c]
        if e is None:
            return
        if e[0] != "t":
            self.cpu_lazy[c] = True
            return
        if self.cpu_gen[c] is None or self.cpu_lazy[c]:
            self.cpu_gen[c] = self.mm_gen
        self.cpu_lazy[c] = False

    def flush_tlb_func(self, c, gen, nr_pages, local):
        """x86 flush_tlb_func on CPU c for a flush at generation `gen` (None: an unmap batch's):
        nothing when the CPU is up to date, a ranged flush only when it is the next and latest
        generation, else a whole one."""
        mine = self.cpu_gen[c]
        if mine is None or (gen is not None and gen <= mine) or mine == self.mm_gen:
            return
        if not (nr_pages and gen == mine + 1 and gen == self.mm_gen):
            nr_pages = 0
        if local:
            if nr_pages == 0:
                self.count(self.cpu_node[c], "nr_tlb_local_flush_all")
            else:
                self.count(self.cpu_node[c], "nr_tlb_local_flush_one", nr_pages)
        self.cpu_gen[c] = self.mm_gen

    def tlb_flush(self, cpus, nr_pages, gen=None):
        """A flush of `cpus` from self.sender at generation `gen` (None: an unmap batch's): one
        remote flush with a receipt per other CPU that is not lazy, then flush_tlb_func on each of
        them and on the sender unless it is lazy."""
        sender, node = self.sender, self.cpu_node[self.sender]
        if nr_pages > 33:
            nr_pages = 0
        others = cpus - {sender}
        if others:
            self.count(node, "nr_tlb_remote_flush")
            for c in sorted(others):
                if not self.lazy(c):
                    self.count(self.cpu_node[c], "nr_tlb_remote_flush_received")
                    self.flush_tlb_func(c, gen, nr_pages, False)
        if sender in cpus and not self.lazy(sender):
            self.flush_tlb_func(sender, gen, nr_pages, True)

    def tlb_unmap(self, batch, mapped_accessible, nr):
        """try_to_unmap with TTU_BATCH_FLUSH: defer to the batch when the mm ran on another CPU (a
        generation per PTE), else flush each PTE at once (a generation each)."""
        if not mapped_accessible:
            return
        if self.mm_cpus - {self.sender}:
            self.mm_gen += nr
            batch |= self.mm_cpus
        else:
            for _ in range(nr):
                self.mm_gen += 1
                self.tlb_flush(self.mm_cpus, 1, self.mm_gen)

    def accessible_pte(self, x):
        return bool(self.flags2[x] & MAPPED) and not (self.flags[x] & PROTNONE)

    def shrink_inactive_list(self, nid, lru, nr_to_scan, kswapd, now):
        lst = self.lru[nid][lru]
        isolated, scanned = [], 0
        while scanned < nr_to_scan and lst:
            x = lst[-1]
            self.lruvec_del(x)
            scanned += self.nr(x)
            isolated.append(x)
        who = "kswapd" if kswapd else "direct"
        typ = "file" if lru == INACTIVE_FILE else "anon"
        self.count(nid, f"pgscan_{who}", scanned)
        self.count(nid, f"pgscan_{typ}", scanned)
        reclaimed = demoted = 0
        batch = set()                   # current->tlb_ubc: evictions and demotions, one flush
        for x in isolated:
            nr = self.nr(x)
            if self.ra_adding[0] <= x < self.ra_adding[1]:
                self.lruvec_add(x)          # being read: kept
                continue
            verdict = self.folio_check_references(x)
            if verdict == "activate":
                self.flags[x] |= ACTIVE
                self.count(nid, "pgactivate", nr)
                self.lruvec_add(x)
                continue
            if verdict == "keep":
                self.lruvec_add(x)
                continue
            if self.can_demote(nid):
                acc = self.accessible_pte(x)
                got = self.demote_folio(nid, x, now)
                if got:
                    self.tlb_unmap(batch, acc, nr)
                    demoted += got
                    reclaimed += got
                    continue
            acc = self.accessible_pte(x)
            got = self.reclaim_folio(nid, x)
            if got:
                self.tlb_unmap(batch, acc, nr)
            if got == 0:                    # no swap space: activated
                self.flags[x] |= ACTIVE
                self.count(nid, "pgactivate", nr)
                self.lruvec_add(x)
                continue
            reclaimed += got
        if batch:
            self.tlb_flush(batch, 0)
        self.count(nid, f"pgsteal_{who}", reclaimed)
        self.count(nid, f"pgsteal_{typ}", reclaimed)
        self.count(nid, f"pgdemote_{who}", demoted)
        return reclaimed

    def snapshot_refaults(self, nid):
        """At the end of a reclaim run (balance_pgdat, do_try_to_free_pages)."""
        self.refault_snap[nid] = [self.counters[nid]["workingset_activate_anon"],
                                  self.counters[nid]["workingset_activate_file"]]

    def may_deactivate(self, nid, file):
        act = self.counters[nid]["workingset_activate_file" if file else "workingset_activate_anon"]
        return act != self.refault_snap[nid][1 if file else 0] or self.inactive_is_low(nid, file)

    def active_scan_size(self, nid, file, scanned, inactive, active):
        """A pass scans both lists of a type by lru_size >> priority: active/inactive per inactive page,
        at most one round's SWAP_CLUSTER_MAX per batch."""
        t = 1 if file else 0
        if active <= 0:
            self.deact_acc[nid][t] = 0.0
            return 0
        if inactive <= 0:
            return min(active, SWAP_CLUSTER_MAX)
        acc = self.deact_acc[nid][t] + scanned * (active / inactive)
        n = int(acc)
        if n >= SWAP_CLUSTER_MAX or n >= active:            # one round of shrink_lruvec: at most 32
            self.deact_acc[nid][t] = 0.0
            return min(n, SWAP_CLUSTER_MAX, active)
        self.deact_acc[nid][t] = acc - n
        return n

    def reclaim_batch(self, nid, kswapd, now):
        anon_ok = self.can_swap() or self.can_demote(nid)
        deact_file = self.may_deactivate(nid, True)
        deact_anon = anon_ok and self.may_deactivate(nid, False)
        inact_file = self.lru_pages(nid, INACTIVE_FILE)
        inact_anon = self.lru_pages(nid, INACTIVE_ANON)
        act_file = self.lru_pages(nid, ACTIVE_FILE)
        act_anon = self.lru_pages(nid, ACTIVE_ANON)
        file_total = inact_file + act_file
        anon_total = inact_anon + act_anon
        if not anon_ok or anon_total == 0:
            scan_file = True
        elif file_total == 0:
            scan_file = False
        elif inact_file > 0 and not deact_file:
            scan_file = True                                    # cache_trim_mode
        elif file_total + self.free[nid] <= self.wmark[nid][WHIGH]:
            scan_file = False
        else:
            self.scan_acc[nid] += self.k["swappiness"]
            if self.scan_acc[nid] >= 200.0:
                self.scan_acc[nid] -= 200.0
                scan_file = False
            else:
                scan_file = True
        reclaimed = scanned = scanned_file = scanned_anon = 0
        for _attempt in range(2):
            lru = INACTIVE_FILE if scan_file else INACTIVE_ANON
            before = self.lru_pages(nid, lru)
            if before > 0:
                reclaimed += self.shrink_inactive_list(nid, lru, SWAP_CLUSTER_MAX, kswapd, now)
                n = min(before, SWAP_CLUSTER_MAX)
                scanned += n
                if scan_file:
                    scanned_file += n
                else:
                    scanned_anon += n
            if scanned > 0 or not anon_ok:
                break
            scan_file = not scan_file
        aged_anon = deact_anon and scanned_anon > 0
        if aged_anon:
            self.shrink_active_list(nid, ACTIVE_ANON,
                                      self.active_scan_size(nid, False, scanned_anon, inact_anon, act_anon))
        if deact_file and (scanned_file > 0 or inact_file == 0):
            nr = self.active_scan_size(nid, True, scanned_file, inact_file, act_file)
            self.shrink_active_list(nid, ACTIVE_FILE, nr)
            if scanned == 0 and nr > 0:
                scanned += 1
        if anon_ok and not aged_anon and self.inactive_is_low(nid, False):
            self.shrink_active_list(nid, ACTIVE_ANON, SWAP_CLUSTER_MAX)
        return reclaimed, scanned

    def kswapd_step(self, nid):
        now = self.kswapd_clock[nid]
        self.sender = self.kswapd_cpu[nid]
        if self.balanced(nid):
            self.kswapd_awake[nid] = False
            self.snapshot_refaults(nid)
            return
        reclaimed, scanned = self.reclaim_batch(nid, True, now)
        if reclaimed > 0:
            self.kswapd_failures[nid] = 0
            self.kswapd_scanned[nid] = 0
        else:
            self.kswapd_scanned[nid] += max(scanned, 1)
            if self.kswapd_scanned[nid] > 2 * self.node_lru_pages(nid) + SWAP_CLUSTER_MAX:
                self.kswapd_failures[nid] += 1
                self.kswapd_scanned[nid] = 0
                self.kswapd_awake[nid] = False
        self.kswapd_clock[nid] = now + 100          # max(cost, 100 ns) with every cost 0
        if self.balanced(nid):
            self.kswapd_awake[nid] = False
        if not self.kswapd_awake[nid]:
            self.snapshot_refaults(nid)

    def direct_reclaim(self, cands):
        total = 0
        for nid in cands:
            scanned = 0
            budget = 2 * self.node_lru_pages(nid) + SWAP_CLUSTER_MAX
            while total < SWAP_CLUSTER_MAX and scanned < budget:
                r, sc = self.reclaim_batch(nid, False, self.now)
                total += r
                if sc == 0 and r == 0:
                    break
                scanned += max(sc, 1)
                if r > 0:
                    self.kswapd_failures[nid] = 0
            if total >= SWAP_CLUSTER_MAX:
                break
        for nid in cands:
            self.snapshot_refaults(nid)
        return total

    # ---- promotion (kernel/sched/fair.c, mm/migrate.c, the page-cache RFC) --------------------
    def should_numa_migrate_memory(self, head, dst, nr, ms):
        if self.managed[dst] == 0:
            return False
        if self.free[dst] > self.wmark[dst][WPROMO] + max(262144, self.managed[dst] >> 4):
            self.nbp[dst]["threshold"] = 0
            self.count(dst, "pgpromote_candidate_nrl", nr)
            return True
        def_th = int(self.k["hot_threshold_ms"])
        rate_limit = int(self.k["promote_rate_limit_MBps"]) << 8
        b = self.nbp[dst]
        period = int(self.k["scan_period_max_ms"])
        if ms - b["th_start"] > period:            # numa_promotion_adjust_threshold()
            b["th_start"] = ms
            ref_cand = rate_limit * period // 1000
            diff = self.counters[dst]["pgpromote_candidate"] - b["th_nr_cand"]
            unit = def_th * 2 // 16
            th = b["threshold"] or def_th
            if diff > ref_cand * 11 // 10:
                th = max(th - unit, unit)
            elif diff < ref_cand * 9 // 10:
                th = min(th + unit, def_th * 2)
            b["th_nr_cand"] = self.counters[dst]["pgpromote_candidate"]
            b["threshold"] = th
        th = b["threshold"] or def_th
        mask = (1 << int(self.k["access_time_bits"])) - 1
        last = self.stamp[head] & mask             # numa_hint_fault_latency(): xchg the access time
        self.stamp[head] = ms & mask
        lead = 4     # stamp_lead_ms(): with every clock at 0 (this model's regime) only a jiffy's rounding
        latency = 0 if ((last - ms) & mask) <= lead else (ms - last) & mask   # a stamp from a thread ahead
        if latency >= th:
            self.count(dst, "numa_latency_rejects")
            return False
        self.count(dst, "pgpromote_candidate", nr)  # numa_promotion_rate_limit()
        nr_cand = self.counters[dst]["pgpromote_candidate"]
        if ms - b["rl_start"] > 1000:
            b["rl_start"] = ms
            b["rl_nr_cand"] = nr_cand
        if nr_cand - b["rl_nr_cand"] >= rate_limit:
            self.count(dst, "promote_rate_limited_pages", nr)
            return False
        return True

    def promotion_candidate(self, task, cpu_nid, head):
        nid = self.node[head]
        if self.tier[nid] == 0:
            return
        nr = self.nr(head)
        if int(self.k["pagecache_promotion_cap"]) == 0 and self.promo_count[task] >= int(self.k["promote_rate_limit_MBps"]):
            self.count(nid, "promote_deferred_pages", nr)
            return
        self.count(cpu_nid, "numa_hint_page_cache")     # numa_migrate_check(), vmf == NULL
        if nid == cpu_nid:
            self.count(cpu_nid, "numa_hint_page_cache_local")
        self.count(cpu_nid, "numa_should_migrate_calls")
        if not self.should_numa_migrate_memory(head, cpu_nid, nr, 0) or cpu_nid == nid:
            return
        # migrate_misplaced_folio_prepare()
        if not self.free[cpu_nid] >= self.wmark[cpu_nid][WHIGH] + nr:
            self.count(cpu_nid, "misplaced_no_room_pages", nr)
            self.wakeup_kswapd(cpu_nid, self.now)
            return
        if not self.flags[head] & LRU or self.flags[head] & ISOLATED:
            self.count(cpu_nid, "misplaced_isolate_failed_pages", nr)
            return
        self.lruvec_del(head)
        self.flags[head] |= ISOLATED
        self.nr_isolated[nid] += nr
        if int(self.k["pagecache_promotion_order"]) == 1:
            self.promo[task].insert(0, head)             # list_add
        else:
            self.promo[task].append(head)                # list_add_tail
        self.promo_count[task] += nr

    def task_numa_promotion_work(self, task, dst):
        self.sender = self.task_cpu[task]
        batch = set()
        for x in self.promo[task]:
            nr, src = self.nr(x), self.node[x]
            self.nr_isolated[src] -= nr
            if not self.watermark_ok(dst, nr, WMIN):     # migrate_misplaced_folio() fails
                self.flags[x] &= ~ISOLATED
                self.lruvec_add(x)
                self.count(src, "pgmigrate_fail", nr)
                self.count(src, "promote_putback_pages", nr)
                continue
            acc = self.accessible_pte(x)
            self.move_isolated_folio(x, dst)
            self.tlb_unmap(batch, acc, nr)
            self.count(dst, "numa_pages_migrated", nr)
            if self.tier[dst] == 0 and self.tier[src] != 0:
                self.count(dst, "pgpromote_success", nr)
        if batch:
            self.tlb_flush(batch, 0)
        self.promo[task] = []
        self.promo_count[task] = 0

    # ---- faults and accesses (mm/memory.c, mm/filemap.c) --------------------------------------
    def folio_order_for(self, r, page):
        reg = self.regions[r]
        lo, hi = reg["start"], reg["end"]
        order = reg["order"]
        anon = reg["kind"] == "anon"
        while order > 0:
            if not (anon and order == 1):
                nr = 1 << order
                head = page & ~(nr - 1)
                if head >= lo and head + nr <= hi and \
                        not any(self.flags2[head + i] & (PRESENT | MAPPED) for i in range(nr)):
                    return order
            order -= 1
        return 0

    def new_folio(self, r, cpu, page, order):
        """A new folio of `order` holding `page`: allocated, accounted, present, with the flags its
        shadow or swap entry restores. Returns (nid, head, nr, pages that were in swap)."""
        anon = self.regions[r]["kind"] == "anon"
        nr = 1 << order
        head = page & ~(nr - 1)
        evict_nid = self.node[page]
        refault = bool(self.flags2[page] & (SHADOW | SWAPPED))
        shadow_age = self.stamp[page]
        shadow_ws = self.flags[page] & WORKINGSET
        nid = self.alloc_folio(r, cpu, head, nr)
        if nid < 0:
            return nid, head, nr, 0
        nr_swapped = 0
        for i in range(nr):
            self.order[head + i] = order
            if self.flags2[head + i] & SWAPPED:
                nr_swapped += 1
            if i > 0:
                self.flags2[head + i] = ANON if anon else 0
                self.flags[head + i] = 0
        self.take_pages(nid, head, nr)
        self.flags2[head] = PRESENT | (self.flags2[head] & CONTIG) | (ANON if anon else 0)
        self.flags[head] = shadow_ws if refault else 0
        if refault:
            self.stamp[head] = shadow_age
            self.workingset_refault(head, nid, evict_nid)
        self.stamp[head] = STAMP_NONE
        return nid, head, nr, nr_swapped

    def fault_in(self, task, cpu, page, op):
        r = self.region_of(page)
        anon = self.regions[r]["kind"] == "anon"
        kind = op & KIND
        cpu_nid = self.cpu_node[cpu]
        if anon and kind == LOAD and not self.flags2[page] & SWAPPED:
            if not self.flags2[page] & MAPPED:           # map the shared zero page
                self.flags2[page] |= MAPPED
                self.count(cpu_nid, "pgfault")
            return
        if not anon and kind != WRITE:
            self.read_miss(task, cpu, r, page, op)
            return
        nid, head, nr, nr_swapped = self.new_folio(r, cpu, page, self.folio_order_for(r, page))
        if nid < 0:
            raise OutOfMemory(page)
        if anon:
            self.count(cpu_nid, "pgfault")
            if nr_swapped:
                self.swap_used -= nr_swapped
                self.count(cpu_nid, "pgmajfault")
                self.count(nid, "pswpin", nr_swapped)
            # a write fault maps the new (or swapped-in) folio writable; a read-faulted swap-in is
            # read-only
            self.flags2[head] |= MAPPED | (PTE_WRITE if kind == STORE else 0)
        self.folio_add_lru(cpu, head)

    # ---- readahead (mm/readahead.c), as tierlab/core/readahead.py describes it -----------------
    # ra state per task: dict(file, start, size, async, mark), prev_pos (the page after the
    # previous read(), -1), req (pages left in the current read())
    RA_PAGES = 32                 # read_ahead_kb = 128
    IO_PAGES = 32                 # max_sectors_kb = 128 (the default device)

    def present(self, x):
        return bool(self.flags2[self.head_of(x)] & PRESENT)

    def ra_read(self, cpu, r, start, end, mark):
        """Folios for the absent pages of [start, end) (cut at EOF), the one holding `mark` marked.
        Returns (marked head or -1, first page not handled)."""
        end = min(end, self.regions[r]["end"])
        marked = -1
        x = start
        while x < end:
            if self.present(x):
                h = self.head_of(x)
                x = h + self.nr(h)
                continue
            self.ra_adding = (start, x)     # locked until read: a later allocation's reclaim keeps them
            nid, head, nr, _ = self.new_folio(r, cpu, x, self.folio_order_for(r, x))
            if nid < 0:
                break
            self.folio_add_lru(cpu, head)
            self.count(nid, "pgpgin", 4 * nr)
            if head <= mark < head + nr:
                marked = head
            x = head + nr
        self.ra_adding = (0, 0)
        return marked, x

    def ra_pages(self, r):
        return self.RA_PAGES * (2 if self.regions[r]["advice"] == "sequential" else 1)

    def max_pages(self, rap, req):
        return min(req, self.IO_PAGES) if req > rap and self.IO_PAGES > rap else rap

    def ra_window(self, task, cpu, r, start, size, async_size):
        ra = self.ra[task]
        ra.update(start=start, size=size, async_size=async_size)
        ra["mark"], x = self.ra_read(cpu, r, start, start + size, start + size - async_size)
        return x

    def sync_ra(self, task, cpu, r, page, req):
        ra = self.ra[task]
        if ra["file"] != r:
            self.ra[task] = ra = dict(file=r, start=0, size=0, async_size=0, mark=-1)
            self.prev_pos[task] = -1
        lo = self.regions[r]["start"]
        req = max(req, 1)
        rap = self.ra_pages(r)
        if self.regions[r]["advice"] == "random" or rap == 0:
            n = 1 if rap == 0 else min(req, max(self.IO_PAGES, rap))
            return self.ra_read(cpu, r, page, page + n, -1)[1] > page
        mx = self.max_pages(rap, req)
        prev = self.prev_pos[task]
        if page == lo or req > mx or (prev >= 0 and 0 <= page - prev <= 1):
            size = 1
            while size < req:
                size *= 2
            size = size * 4 if size <= mx // 32 else size * 2 if size <= mx // 4 else mx
            async_size = size - req if size > req else size >> 1
        else:
            miss = page - 1
            for _ in range(mx):                  # page_cache_prev_miss
                if miss < lo:
                    miss = lo - 1
                    break
                if not self.present(miss):
                    break
                miss -= 1
            contig = page - miss - 1
            if contig <= req:
                return self.ra_read(cpu, r, page, page + req, -1)[1] > page
            if miss < lo:
                contig *= 2
            size, async_size = min(contig + req, mx), 1
        return self.ra_window(task, cpu, r, page, size, async_size) > page

    def async_ra(self, task, cpu, page, req):
        ra = self.ra[task]
        ra["mark"] = -1
        r = ra["file"]
        mx = self.max_pages(self.ra_pages(r), max(req, 1))
        expected = (ra["start"] + ra["size"] - ra["async_size"]) & ~(self.nr(self.head_of(page)) - 1)
        assert page == expected
        cur = ra["size"]
        start = ra["start"] + cur
        size = max(cur, 4 * cur if cur < mx // 16 else 2 * cur if cur <= mx // 2 else mx)
        align = 1 << min(2, (mx & -mx).bit_length() - 1)
        end = start + size
        if end & ~(align - 1) > start:
            size -= end - (end & ~(align - 1))
        self.ra_window(task, cpu, r, start, size, size)

    def read_miss(self, task, cpu, r, page, op):
        kind = op & KIND
        if kind == READ:
            if not self.sync_ra(task, cpu, r, page, self.req[task]):
                raise OutOfMemory(page)
            return
        rap = self.ra_pages(r)
        if op & STREAM and rap > 0 and self.regions[r]["advice"] != "random":
            ok = self.sync_ra(task, cpu, r, page, rap)
        else:
            order = self.folio_order_for(r, page)
            head = page & ~((1 << order) - 1)
            ok = self.ra_read(cpu, r, head, head + (1 << order), -1)[1] > page
        if not ok:
            raise OutOfMemory(page)
        cpu_nid = self.cpu_node[cpu]
        self.count(cpu_nid, "pgfault")
        self.count(cpu_nid, "pgmajfault")
        self.flags2[self.head_of(page)] |= MAPPED | (PTE_WRITE if kind == STORE else 0)

    def access(self, task, cpu, page, op):
        self.mm_cpus.add(cpu)
        head = self.head_of(page)
        if not self.flags2[head] & PRESENT:
            self.fault_in(task, cpu, page, op)
            head = self.head_of(page)
            if not self.flags2[head] & PRESENT:
                return                                   # the zero page
        kind = op & KIND
        if kind >= READ:
            same = self.call_start[task] != 0 and self.head_of(self.last_page[task]) == head
            self.call_start[task] = 1 if op & SYSCALL_END else 0
            if not same and self.folio_mark_accessed(head):
                if self.tiering() and not self.flags[head] & ISOLATED and self.k["pagecache_promotion_enabled"]:
                    self.promotion_candidate(task, self.cpu_node[cpu], head)
            self.last_page[task] = page
            if kind == WRITE:
                self.flags[head] |= DIRTY
            if page == self.ra[task]["mark"]:
                self.ra[task]["mark"] = -1               # an evicted marked folio, read again
            if op & SYSCALL_END and kind == READ:
                self.prev_pos[task] = page + 1
            return
        if not self.flags2[head] & MAPPED:
            self.flags2[head] |= MAPPED | (PTE_WRITE if kind == STORE else 0)
            self.count(self.cpu_node[cpu], "pgfault")
        elif kind == STORE and not self.flags2[head] & PTE_WRITE:
            self.flags2[head] |= PTE_WRITE                # do_wp_page: reuse / page_mkwrite
            self.count(self.cpu_node[cpu], "pgfault")
        assert not self.flags[head] & PROTNONE, "hint faults are outside the reference model's regime"
        self.flags[head] |= YOUNG
        if kind == STORE:
            self.flags[head] |= DIRTY

    # ---- the scheduler, in the all-costs-zero regime ------------------------------------------
    def enqueue(self, c, e):
        self.rq[c][e] = self.rq_seq[c]
        self.rq_seq[c] += 1

    def update_min_vruntime(self, c):
        if self.rq[c]:
            self.min_vruntime[c] = max(self.min_vruntime[c], min(self.vr[e] for e in self.rq[c]))

    def sched_slice(self, nr):
        period = self.sched_latency if nr <= self.sched_latency // self.sched_min_gran else nr * self.sched_min_gran
        return max(period // max(nr, 1), 1)

    def resched(self, c, clock, waiting):
        """sched_resched(): enqueue the waiting tasks and the woken kswapds (place_entity with
        sleeper credit; a kswapd preempts curr when curr is more than wakeup_granularity ahead),
        keep curr unless it is gone, preempted or through its slice, else pick the leftmost."""
        self.update_min_vruntime(c)
        credit = self.min_vruntime[c] - self.sched_latency // 2
        for t in waiting:
            self.vr[("t", t)] = max(self.vr[("t", t)], credit)
            self.enqueue(c, ("t", t))
        cur = self.curr[c]
        preempt = False
        for n in range(self.N):
            k = ("k", n)
            if self.kswapd_cpu[n] == c and self.kswapd_awake[n] and k not in self.rq[c] \
                    and self.kswapd_clock[n] <= clock:
                self.vr[k] = max(self.vr[k], credit)
                self.enqueue(c, k)
                preempt |= cur is not None and self.vr[cur] - self.vr[k] > self.sched_gran
        nr = len(self.rq[c])
        if cur is not None and not preempt and (nr <= 1 or self.runtime[cur] - self.slice_start[c] < self.sched_slice(nr)):
            return
        if cur is not None:
            self.enqueue(c, cur)                      # put_prev_entity: behind its equals
        self.curr[c] = min(self.rq[c], key=lambda e: (self.vr[e], self.rq[c][e])) if self.rq[c] else None
        self.switch_mm(c)
        if self.curr[c] is not None:
            self.slice_start[c] = self.runtime[self.curr[c]]
            self.update_min_vruntime(c)

    def run_chunk(self, per_task):
        """per_task: one list of (page, op) per task. Runs the chunk as the engine's CFS runqueues do
        with every access cost 0 (see the module docstring)."""
        pos = [0] * self.T
        C = len(self.cpu_node)
        # Simulation.run: this chunk's input arrives at the latest time a task reached (sys.now);
        # a CPU that idled since moves on to it
        self.cpu_clock = [max(x, self.latest) for x in self.cpu_clock]

        def has_work(t):
            return pos[t] < len(per_task[t])

        def pending(c):
            return [n for n in range(self.N) if self.kswapd_cpu[n] == c and self.kswapd_awake[n]
                    and ("k", n) not in self.rq[c]]

        while True:
            # the CPU with the smallest "ready at" time: CPUs with something enqueued or waiting
            # (lowest number first), then the CPUs of woken kswapds not yet enqueued (node order)
            cands = []
            for c in range(C):
                waiting = any(self.task_cpu[t] == c and has_work(t) and ("t", t) not in self.rq[c]
                              for t in range(self.T))
                if self.rq[c] or waiting:
                    cands.append((self.cpu_clock[c], c))
            for n in range(self.N):
                c = self.kswapd_cpu[n]
                if n in pending(c):
                    cands.append((max(self.cpu_clock[c], self.kswapd_clock[n]), c))
            best, best_t = -1, None
            for t_ready, c in cands:
                if best_t is None or t_ready < best_t:
                    best, best_t = c, t_ready
            if best < 0:
                break
            c = best
            self.cpu_clock[c] = clock = max(self.cpu_clock[c], best_t)
            self.resched(c, clock, [t for t in range(self.T) if self.task_cpu[t] == c and has_work(t)
                                    and ("t", t) not in self.rq[c]])
            if self.curr[c] is None:
                continue
            kind, x = self.curr[c]
            if kind == "k":
                self.kswapd_clock[x] = max(self.kswapd_clock[x], clock)
                self.kswapd_step(x)
                end = max(self.kswapd_clock[x], clock)
                self.vr[("k", x)] += end - clock
                self.runtime[("k", x)] += end - clock
                self.cpu_clock[c] = end
                if not self.kswapd_awake[x]:
                    del self.rq[c][("k", x)]
                    self.curr[c] = None
                continue
            t = x
            self.now = clock
            self.latest = max(self.latest, clock)
            wakeups = self.wakeups
            while pos[t] < len(per_task[t]):
                page, op = per_task[t][pos[t]]
                if op & KIND == READ:
                    present = self.present(page)
                    if page == self.ra[t]["mark"] or not present:
                        n = 0                            # pages left in this read() (readahead's req_count)
                        for _, o in per_task[t][pos[t]:]:
                            n += 1
                            if o & SYSCALL_END:
                                break
                        self.req[t] = n
                    if page == self.ra[t]["mark"] and present:
                        self.async_ra(t, c, page, self.req[t])
                pos[t] += 1
                self.access(t, c, page, op)
                if op & SYSCALL_END and self.promo_count[t] > 0:
                    self.task_numa_promotion_work(t, self.cpu_node[c])
                if self.wakeups != wakeups:
                    break
            if not has_work(t):
                del self.rq[c][("t", t)]
                self.curr[c] = None

    # ---- views for the comparison -------------------------------------------------------------
    def node_counters(self):
        return [{k: v for k, v in c.items() if v} for c in self.counters]


def check_counter_names(model):
    for c in model.counters:
        for k in c:
            assert k in VMSTAT_NAMES, k
