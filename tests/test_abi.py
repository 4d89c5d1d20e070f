"""SimState goes to kernels by reference (core/_abi.py): one pointer, its fields read through it."""
from numba import njit, typeof

from simkit import machine, make_sim
from tierlab.core._abi import SimStateType
from tierlab.workloads.base import Region


@njit(_nrt=False, no_cpython_wrapper=True)
def _field_sum(s, i):
    return s.pages.node[i] + s.tlbs.geo.shape[0] + s.counters.shape[1] + s.pgdat[0].free


@njit(_nrt=False)
def _entry(s, i):
    s.pgdat[0].free += 1          # writes go through the arrays, as by value
    return _field_sum(s, i)


def test_simstate_is_one_pointer_and_reads_the_same_fields():
    sim = make_sim(machine((64, 1, 576)), [Region("a", "anon", 16)])
    s = sim.state
    assert isinstance(typeof(s), SimStateType)
    free = int(s.pgdat[0]["free"])
    got = _entry(s, 3)
    assert int(s.pgdat[0]["free"]) == free + 1
    assert got == int(s.pages.node[3]) + s.tlbs.geo.shape[0] + s.counters.shape[1] + free + 1
    llvm = next(iter(_entry.inspect_llvm().values()))
    sig = next(line for line in llvm.splitlines() if line.startswith("define") and "_entry" in line
               and "cpython" not in line and "cfunc" not in line)
    # retptr, excinfo, s, i: the state is one pointer, not ~450 flattened array fields
    assert sig.count("%arg.") == 2 and "ptr" in sig.split("%arg.s")[0].rsplit(",", 1)[-1]


def test_a_forked_state_has_the_same_numba_type():
    """copy_state (Simulation.fork) gives arrays of the same types (a layout changed by the copy,
    e.g. a strided view copied contiguous, would make engine.run compile again for the fork)."""
    from tierlab.core.state import copy_state
    s = make_sim(machine((64, 1, 576)), [Region("a", "anon", 16)]).state
    c = copy_state(s)
    assert typeof(c) == typeof(s)
    assert c.pages.node is not s.pages.node
