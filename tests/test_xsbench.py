"""The xsbench workload's geometry and access stream, hand-checked against XSBench's structure
(GridInit.c, Simulation.c, Materials.c): region sizes, the initialisation, one stack store per
lookup, the binary search's page path, the index row and one access per nuclide of the material,
--scale, the write_share what-if and bad input."""
import numpy as np
import pytest

from tierlab.core.ops import OP_KIND_MASK, OP_MARK, OP_STORE
from tierlab.errors import ConfigError
from tierlab.workloads import make_workload
from tierlab.workloads.xsbench import MAT_DIST

PAGE = 4096


def test_large_problem_sizes_at_full_scale():
    w = make_workload("xsbench", {"particles": 1000})
    r = {x.name: x.pages for x in w.regions()}
    n = 355 * 11303
    assert r["nuclide_grid"] == -(-n * 48 // PAGE)           # 192.6 MB of 6-double points
    assert r["energy_grid"] == -(-n * 8 // PAGE)
    assert r["index_grid"] == -(-n * 355 * 4 // PAGE)        # 5.7 GB: the bulk
    assert r["stacks"] == 16
    mats = w.materials()
    assert [len(m) for m in mats] == [321, 5, 4, 4, 27, 21, 21, 21, 21, 21, 9, 9]
    # large fuel: isotopes 68..354 plus 34 of the small set; every other material within 0..67
    assert set(range(68, 355)) <= set(mats[0].tolist()) and all(m.max() < 68 for m in mats[1:])
    assert MAT_DIST.sum() == pytest.approx(1.001)             # pick_mat's probabilities as published


def test_scale_divides_gridpoints_and_particles():
    w = make_workload("xsbench", {"particles": 64_000}, scale=64)
    assert w.n_gridpoints == round(11303 / 64) and w.nr_particles == 1000 and w.n_isotopes == 355


def _stream(w, seed=3):
    chunks = list(w.chunks(seed))
    T = w.threads
    per = [[] for _ in range(T)]
    for ch in chunks:
        for t in range(T):
            a, b = ch.offsets[t], ch.offsets[t + 1]
            per[t].append((ch.pages[a:b], ch.ops[a:b]))
    return [(np.concatenate([p for p, _ in x]), np.concatenate([o for _, o in x])) for x in per]


def test_initialisation_then_lookups_per_thread():
    w = make_workload("xsbench", {"particles": 6400, "threads": 4, "lookups": 3}, scale=64)
    regs = w.regions()
    base = np.cumsum([0] + [r.pages for r in regs])
    streams = _stream(w)
    init_written = np.concatenate([p[:np.flatnonzero(o & OP_MARK)[0] + 1] for p, o in streams])
    # every grid page written exactly once, before any lookup
    assert sorted(init_written.tolist()) == list(range(int(base[3])))
    per_thread = w.nr_particles // 4 * 3
    for t, (pages, ops) in enumerate(streams):
        marks = np.flatnonzero(ops & OP_MARK)
        assert len(marks) == 2 and marks[1] == len(ops) - 1
        look_p, look_o = pages[marks[0] + 1:], ops[marks[0] + 1:]
        stores = (look_o & OP_KIND_MASK) == OP_STORE
        # one store per lookup, to the thread's own stack page, ending it
        assert stores.sum() == per_thread and (look_p[stores] == base[3] + t).all()
        assert stores[-1]
        # everything else is a load inside the grids
        assert (look_p[~stores] < base[3]).all()


def test_one_lookup_touches_the_search_path_the_index_row_and_one_point_per_nuclide():
    w = make_workload("xsbench", {"particles": 6400, "threads": 1}, scale=64)
    base = np.cumsum([0] + [r.pages for r in w.regions()])
    pages, ops = _stream(w)[0]
    look = pages[np.flatnonzero(ops & OP_MARK)[0] + 1:]
    ends = np.flatnonzero((ops[np.flatnonzero(ops & OP_MARK)[0] + 1:] & OP_KIND_MASK) == OP_STORE)
    first = look[:ends[0]]
    search = first[(first >= base[1]) & (first < base[2])]
    index = first[(first >= base[2]) & (first < base[3])]
    points = first[first < base[1]]
    steps = int(np.ceil(np.log2(w.n_union)))
    assert steps - 2 <= len(search) <= steps                 # one load per binary-search step
    assert search[0] == base[1] + (w.n_union - 1) // 2 * 8 // PAGE   # the first probe: the middle
    assert 1 <= len(index) <= 2                              # a 1,420-byte row: one or two pages
    nucs = {len(m) for m in w.materials()}
    assert len(points) in nucs                               # one access per nuclide of the material


def test_write_share_stores_into_the_grid_points():
    w = make_workload("xsbench", {"particles": 6400, "threads": 1, "write_share": 1.0}, scale=64)
    base = np.cumsum([0] + [r.pages for r in w.regions()])
    pages, ops = _stream(w)[0]
    m = np.flatnonzero(ops & OP_MARK)[0] + 1
    st = (ops[m:] & OP_KIND_MASK) == OP_STORE
    grid_stores = pages[m:][st & (pages[m:] < base[1])]
    assert len(grid_stores) == w.nr_particles * w.lookups    # every lookup writes one point
    plain = make_workload("xsbench", {"particles": 6400, "threads": 1}, scale=64)
    p2, _ = _stream(plain)[0]
    assert np.array_equal(p2, pages)                          # the same pages, only the op differs


@pytest.mark.parametrize("params, scale, key", [
    ({"particles": 10}, 64, "particles"),
    ({"gridpoints": 50}, 64, "gridpoints"),
    ({"size": "huge"}, 1, "size"),
    ({"write_share": 1.5}, 1, "write_share"),
    ({"threads": 0}, 1, "threads"),
])
def test_bad_input_names_the_key(params, scale, key):
    with pytest.raises(ConfigError, match=key):
        make_workload("xsbench", params, scale=scale)
