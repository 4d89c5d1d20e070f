"""`xsbench`: XSBench's history-based cross-section lookups (seed 004's benchmark).

XSBench (ANL CESAR, github.com/ANL-CESAR/XSBench, openmp-threading) is the proxy app of OpenMC's
macroscopic cross-section lookup. Read from its GridInit.c, Simulation.c, Materials.c and io.c
(the structure and the published constants are used here, no code):

- Memory (the default unionized grid), allocated and written once by the main thread before the
  OpenMP region, in order:
  the nuclide grids (n_isotopes x n_gridpoints points of 6 doubles, 48 bytes: each isotope's grid
  sorted by energy), the unionized energy array (n_isotopes x n_gridpoints doubles, sorted) and
  the index grid (one int per unionized energy and isotope: n_isotopes^2 x n_gridpoints x 4 bytes,
  5.7 GB of the "large" problem's 5.9 GB). Every page is written, so every PTE starts dirty.
- `-s large` (the default): 355 isotopes, 11303 grid points per isotope; `small`: 68 isotopes.
- The lookup loop (history-based, the default `-m history`; OpenMP threads take particles 100 at a
  time): per particle `-l` = 34 lookups, each at a random energy in a random material (material
  probabilities from pick_mat: fuel 0.140, cladding 0.052, cold water 0.275, hot water 0.134, RPV
  0.154, reflectors and plates 0.064/0.066/0.055, nozzles 0.008/0.015, assembly ends
  0.025/0.013). A lookup binary-searches the unionized energy array, reads the index grid's row
  for that energy, and for each nuclide of the material (321 in large fuel, 5/4/4/27/21x5/9/9 in
  the others) reads that nuclide's two bracketing grid points and accumulates into a 5-double
  vector on the thread's stack.
- Materials (Materials.c): large fuel is the 34 small-problem fuel nuclides plus isotopes
  68..354, which appear in no other material; every other material draws from isotopes 0..67. The
  particular ids below 68 are drawn here once with a fixed seed (the benchmark hard-codes them; what
  matters to memory is which isotopes are shared, and that structure is kept).

The access stream, per lookup: one load per binary-search step in the energy array (the first
steps hit the same few pages for every lookup), one per page of the index-grid row (1-2), one per
nuclide for its bracketing pair of grid points (two adjacent 48-byte entries: one access), one
store to the thread's stack page. Energies are uniform, so the search target in a sorted array of
uniform values is index ~ energy x length, and a nuclide's bracketing point likewise.

--scale F divides n_gridpoints and `particles` by F (the isotopes and so the structure of the
materials stay): the grids are F times smaller and the run F times shorter, with the same accesses
per page per unit of the kernel's (scaled) clock. `write_share` is a what-if (XSBench never writes
its grids after the initialisation): some lookups store into a grid point. `particles` defaults
to the seed's -p 100000000;
reproductions run a fraction of it (a shorter run at the same rates). The threads are one process
(`threads`, 16 in the seed); `cpunodebind` places them.

The initialisation is written by all threads, a slice of each grid each, grid after grid, and the
lookups start after a barrier (a Chunk phase: every thread waits for the last one's writes, as at
the start of XSBench's parallel region). XSBench's main thread writes the grids alone; spreading
the writes keeps the initialisation short, and first-touch places the pages the same way (every
thread on node 0; node 0 fills in allocation order, the rest spills to node 1).

MARKs: every task after its slice of the initialisation and after its last lookup; the lookup
phase runs from the last initialisation MARK to the last MARK.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

from ..core.ops import OP_LOAD, OP_MARK, OP_STORE
from ..errors import ConfigError
from ..units import PAGE_SIZE
from ._kernels import fill_xsbench_lookups
from .base import (
    MAX_TASKS, Chunk, OpStream, Process, Region, Workload, choice_param, float_param, int_param, nodes_param,
    one_block, stream_chunks,
)

SIZES = {"large": (355, 11303), "small": (68, 11303)}     # io.c: n_isotopes, n_gridpoints
FUEL_SMALL = 34                                          # Materials.c: small fuel nuclides
NUM_NUCS = (None, 5, 4, 4, 27, 21, 21, 21, 21, 21, 9, 9)   # materials 1..11; fuel by size
MAT_DIST = np.array([0.140, 0.052, 0.275, 0.134, 0.154, 0.064, 0.066, 0.055, 0.008, 0.015, 0.025, 0.013])
POINT_BYTES = 48                                         # NuclideGridPoint: 6 doubles
LOOKUP_BLOCK = 4096        # lookups drawn at a time (a thread's stream is the same whatever the chunks)


# The lookup loop's code: XSBench's openmp-threading build (gcc -O3 -flto, as its Makefile) puts
# run_history_based_simulation's OpenMP body (0x6f2 bytes) and calculate_macro_xs (0x3e2 bytes, with
# calculate_micro_xs and grid_search inlined) at 0x34f0-0x4182: two 4 KiB pages (nm -S of a build here).
HOT_TEXT_PAGES = 2


class XSBench(Workload):
    name = "xsbench"
    description = ("seed 004's benchmark: XSBench's history-based cross-section lookups over large read-only "
                   "grids written once, from many threads")
    params = {
        "size": choice_param("large", tuple(SIZES), "problem size (-s): isotopes and grid points"),
        "gridpoints": int_param(0, "grid points per isotope (-g; 0: the size's, 11303)", lo=0, hi=1 << 24),
        "particles": int_param(100_000_000, "particle histories (-p), divided by --scale", lo=1),
        "lookups": int_param(34, "lookups per particle (-l)", lo=1, hi=1 << 20),
        "threads": int_param(16, "OpenMP threads (-t)", lo=1, hi=MAX_TASKS),
        "cpunodebind": nodes_param("", "run the threads on these nodes' CPUs, e.g. 0"),
        "write_share": float_param(0.0, "what-if, not XSBench: the share of lookups that also store into "
                                        "their first nuclide's grid point (a write to a read-only PTE takes a "
                                        "write-protect fault, which gives MIGRC up)", hi=1.0),
    }
    access_params = ("particles", "lookups")

    def validate(self):
        if self.nr_particles < self.threads:
            raise ConfigError(f"particles: {self.particles} / scale {self.scale:g} leaves fewer particles than "
                              f"threads ({self.threads}); accepted: particles >= threads x scale")
        if self.n_gridpoints < 2:
            raise ConfigError("gridpoints: fewer than 2 grid points per isotope at this scale; accepted: "
                              "gridpoints / scale >= 2")

    # --- geometry ------------------------------------------------------------------------------
    @property
    def n_isotopes(self) -> int:
        return SIZES[self.size][0]

    @property
    def n_gridpoints(self) -> int:
        return max(1, round((self.gridpoints or SIZES[self.size][1]) / self.scale))

    @property
    def nr_particles(self) -> int:
        return max(1, round(self.particles / self.scale))

    @property
    def nr_tasks(self) -> int:
        return self.threads

    @property
    def n_union(self) -> int:
        return self.n_isotopes * self.n_gridpoints

    def _pages(self, nbytes: int) -> int:
        return max(1, -(-nbytes // PAGE_SIZE))

    def regions(self) -> list[Region]:
        return [Region("nuclide_grid", "anon", self._pages(self.n_union * POINT_BYTES)),
                Region("energy_grid", "anon", self._pages(self.n_union * 8)),
                Region("index_grid", "anon", self._pages(self.n_union * self.n_isotopes * 4)),
                Region("stacks", "anon", self.threads)]

    def processes(self) -> list[Process]:
        return [Process("xsbench", threads=self.threads, vmas=tuple(r.name for r in self.regions()),
                        cpunodebind=self.cpunodebind, text_pages=HOT_TEXT_PAGES)]

    def materials(self) -> list[np.ndarray]:
        """Nuclide ids of the 12 materials (see the module docstring)."""
        rng = np.random.default_rng(12)
        small = self.n_isotopes == SIZES["small"][0]
        fuel = rng.choice(68, FUEL_SMALL, replace=False)
        if not small:
            fuel = np.concatenate([fuel, np.arange(68, self.n_isotopes)])
        return [np.sort(fuel)] + [np.sort(rng.choice(68, n, replace=False)) for n in NUM_NUCS[1:]]

    def nr_marks(self) -> int:
        return 2

    def _split(self) -> np.ndarray:
        """Particles per thread (schedule(dynamic, 100) hands them out evenly to equal threads)."""
        n, t = self.nr_particles, self.threads
        return np.full(t, n // t, np.int64) + (np.arange(t) < n % t)

    def _init_pages(self) -> int:
        return sum(r.pages for r in self.regions()[:3])

    def _lookup_cost(self) -> float:
        """Mean accesses of one lookup (for chunk sizing and progress)."""
        mats = self.materials()
        nucs = float(MAT_DIST @ np.array([len(m) for m in mats]) / MAT_DIST.sum())
        return np.ceil(np.log2(max(2, self.n_union))) + 1.5 + nucs + 1

    def nr_accesses(self) -> int:
        # the binary search's steps vary by one or two with the target: an estimate, for progress
        return int(self._init_pages() + self.nr_particles * self.lookups * self._lookup_cost())

    # --- the stream ----------------------------------------------------------------------------
    def chunks(self, seed: int) -> Iterator[Chunk]:
        regs = self.regions()
        base = np.cumsum([0] + [r.pages for r in regs])
        T = self.threads
        per_task = max(1, self.chunk_accesses // T)
        # initialisation: the three grids written once, grid after grid, each split evenly
        # among the threads (see the module docstring: the main thread's serial writes are spread
        # over all of them), then the lookups after a barrier (the parallel region's start)
        yield from stream_chunks([OpStream(self._init_block(base, t)) for t in range(T)], per_task)
        mats = self.materials()
        mat_len = np.array([len(m) for m in mats])
        mat_tab = np.zeros((len(mats), mat_len.max()), np.int64)
        for i, m in enumerate(mats):
            mat_tab[i, :len(m)] = m
        cum = np.cumsum(MAT_DIST)
        per_thread = self._split() * self.lookups

        def lookups(t):
            rng = np.random.default_rng([seed, 4, t])
            done = 0

            def make():
                nonlocal done
                k = int(min(LOOKUP_BLOCK, per_thread[t] - done))
                if k == 0:
                    return None
                pages, stores = self._lookups(rng, k, cum, mat_tab, mat_len, base, t)
                ops = np.full(pages.shape[0], OP_LOAD, np.uint8)
                ops[stores] = OP_STORE
                done += k
                if done == per_thread[t]:
                    ops[-1] |= OP_MARK
                return pages, ops
            return OpStream(make)
        yield from stream_chunks([lookups(t) for t in range(T)], per_task, start_phase=True)

    def _init_block(self, base, t):
        """Thread t's initialisation writes: its share of each grid, grid after grid, a MARK after
        the last (one block)."""
        T = self.threads
        pages = np.concatenate([np.arange(lo + (hi - lo) * t // T, lo + (hi - lo) * (t + 1) // T, dtype=np.int64)
                                for lo, hi in zip(base[:3].tolist(), base[1:4].tolist())])
        ops = np.full(pages.shape[0], OP_STORE, np.uint8)
        ops[-1:] |= OP_MARK
        return one_block(pages, ops)

    def _lookups(self, rng, k, cum, mat_tab, mat_len, base, t) -> np.ndarray:
        """The pages k lookups of thread t touch, in order, and the positions among them that are
        stores (each lookup's stack store, and the write_share what-if's grid stores)."""
        n_iso, n_gp, N = self.n_isotopes, self.n_gridpoints, self.n_union
        energy = rng.random(k)
        mat = np.minimum(np.searchsorted(cum, rng.random(k) * cum[-1], side="right"), len(cum) - 1)
        # at most: the search's steps, two index pages, every nuclide's point, the stack
        bound = int(N).bit_length() + 3 + mat_tab.shape[1]
        pages = np.empty(k * bound, np.int64)
        ends = np.empty(k, np.int64)
        firsts = np.empty(k, np.int64)
        n = fill_xsbench_lookups(pages, ends, firsts, energy, mat.astype(np.int64), mat_tab, mat_len.astype(np.int64),
                                 np.int64(N), np.int64(n_iso), np.int64(n_gp), base.astype(np.int64),
                                 np.int64(POINT_BYTES), np.int64(PAGE_SIZE), np.int64(base[3] + t))
        # the stack store ends each lookup; the what-if writes hit the first nuclide's grid point
        stores = ends
        if self.write_share > 0:
            stores = np.concatenate([stores, firsts[rng.random(k) < self.write_share]])
        return pages[:n], stores

    def summary(self, result, phase_start_ns: int) -> dict:
        """init_s: the initialisation's end (the last thread's first MARK); lookup_s: from there to
        the last thread's last MARK; lookups."""
        m = result.marks_s
        if len(m) < 2 * self.threads:
            return {}
        first = m.groupby("task").time_s.min()
        init = float(first.max())
        return {"init_s": init, "lookup_s": float(m.time_s.max()) - init,
                "lookups": int(self.nr_particles * self.lookups)}
