"""The capacity calendar (core/resource.py): hand-worked bookings, and properties checked against a
naive calendar (a dict of bins, no ring, no full-run hint) for arbitrary request streams."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as hs

from tierlab.core.resource import (
    bin_shift_for, calendar_array, calendar_book, calendar_dtype, calendar_utilisation,
)

W = 1024        # bin width used below, ns
NB = 512        # ring size used below


def cal1(rate=1.0, bin_ns=W):
    return calendar_array([rate], bin_ns, NB)


def book(cal, t, amount):
    return calendar_book(cal, 0, np.int64(t), float(amount))


def ring_fills(cal):
    """{absolute bin: fill} of the bins the ring holds."""
    c = cal[0]
    return {int(tg): float(f) for tg, f in zip(c.bin_tag, c.bin_fill) if tg >= 0}


class NaiveCalendar:
    """The calendar's rule with an unbounded dict of bins and no shortcuts."""

    def __init__(self, rate, bin_ns):
        self.rate, self.w, self.cap, self.fill = rate, bin_ns, rate * bin_ns, {}

    def book(self, t, amount):
        b = j = t // self.w
        left = amount
        while True:
            room = self.cap - self.fill.get(j, 0.0)
            if left <= room:
                self.fill[j] = self.fill.get(j, 0.0) + left
                break
            left -= room
            self.fill[j] = self.cap
            j += 1
        if j == b:
            return 0.0
        end = float(j * self.w) + self.w * self.fill[j] / self.cap
        return max(0.0, end - (t + amount / self.rate))


# ---- hand-worked bookings: a lock (rate 1 ns of hold per ns), bins of 1024 ns

def test_requests_with_room_in_their_bin_never_wait_whatever_the_order():
    cal = cal1()
    # B books late in bin 0 first, then A books earlier in the same bin: 300 + 500 <= 1024
    assert book(cal, 900, 300) == 0.0
    assert book(cal, 100, 500) == 0.0
    assert ring_fills(cal) == {0: 800.0}


def test_two_clients_on_a_lock_the_second_waits_for_the_first():
    cal = cal1()
    # A holds 800 ns from t=0; B wants 800 ns from t=100. Bin 0 has 224 ns left: B takes them and
    # spills 576 into bin 1, so its hold ends at 1024 + 576 = 1600, where a FIFO lock would also
    # end it (A releases at 800, B holds 800..1600): B waits 1600 - (100 + 800) = 700 ns.
    assert book(cal, 0, 800) == 0.0
    assert book(cal, 100, 800) == pytest.approx(700.0)
    assert ring_fills(cal) == {0: 1024.0, 1: 576.0}
    c = cal[0]
    assert (c.nr_waits, c.wait_ns, c.booked) == (1, pytest.approx(700.0), 1600.0)


def test_saturation_serialises_a_backlog_and_the_hint_skips_it():
    cal = cal1()
    # five 1024-ns holds all wanted at t=0: they fill bins 0..4; the k-th ends at (k+1)*1024 and
    # waits k*1024 (the first fits its bin exactly)
    waits = [book(cal, 0, 1024) for _ in range(5)]
    assert waits == [0.0, 1024.0, 2048.0, 3072.0, 4096.0]
    assert (cal[0].full_lo, cal[0].full_hi) == (0, 5)
    # a request at t=2000 (bin 1, full) goes straight to bin 5: ends 5*1024 + 100, waits that
    # minus (2000 + 100)
    assert book(cal, 2000, 100) == pytest.approx(5 * 1024 + 100 - 2100)


def test_a_request_that_ends_before_its_spill_point_does_not_wait():
    cal = cal1()
    assert book(cal, 0, 1000) == 0.0
    # at t=1000 a 100-ns hold: bin 0 has 24 left, 76 spill into bin 1 (ending at 1024 + 76 =
    # 1100), the same as t + 100: no wait
    assert book(cal, 1000, 100) == 0.0


def test_bandwidth_calendar_caps_bytes_per_bin():
    cal = calendar_array([28.0], W, NB)          # 28 bytes/ns: 28672 bytes per bin
    waits = [book(cal, 0, 4096) for _ in range(8)]
    assert waits[:7] == [0.0] * 7            # 7 pages fit in bin 0
    # the 8th spills 4096 into bin 1: ends at 1024 + 1024 * 4096/28672, against t + 4096/28
    # unloaded
    assert waits[7] == pytest.approx(1024 + 1024 * 4096 / 28672 - 4096 / 28)
    assert max(ring_fills(cal).values()) <= 28672.0


def test_beyond_the_horizon_the_lost_bins_count_as_full_and_it_is_counted():
    """A request older than the horizon: the bins it would fill are gone, and whoever moved the
    head that far filled them (a device's backlog), so it is served from the oldest bin held,
    waiting from its own time to there."""
    cal = cal1()
    late = NB * W * 3
    book(cal, late, 10)                      # head = bin 1536: the ring holds bins 1025..1536
    oldest = late // W - NB + 1
    wait = book(cal, 0, 500)                 # bin 0 is long gone
    c = cal[0]
    assert c.nr_beyond == 1 and c.beyond == 0.0
    assert ring_fills(cal)[oldest] == 500.0
    assert wait == pytest.approx(oldest * W + W * 500 / c.cap - 500 / c.rate)
    assert c.booked == sum(ring_fills(cal).values()) + c.expired + c.beyond


def test_utilisation_of_recent_bins():
    cal = cal1()
    for j in range(4):
        book(cal, j * W, 256 * (j + 1))      # bins 0..3 at 25, 50, 75, 100 %
    # at t in bin 4, the last 2 complete bins (2, 3) average 87.5 %; the last 4 average 62.5 %
    assert calendar_utilisation(cal, 0, np.int64(4 * W + 5), 2) == pytest.approx(0.875)
    assert calendar_utilisation(cal, 0, np.int64(4 * W + 5), 4) == pytest.approx(0.625)
    # a late booking into bin 1 (in the window) is seen at once; moving on to bin 5 slides
    book(cal, 1 * W, 256)
    assert calendar_utilisation(cal, 0, np.int64(4 * W + 5), 4) == pytest.approx(0.6875)
    assert calendar_utilisation(cal, 0, np.int64(5 * W), 4) == pytest.approx((768 + 768 + 1024) / 4096)


def test_bin_width_and_ring_size_must_be_powers_of_two():
    assert bin_shift_for(1024) == 10
    with pytest.raises(ValueError, match="power of two"):
        bin_shift_for(1000)
    with pytest.raises(ValueError, match="power of two"):
        calendar_dtype(1000)


# ---- properties

streams = hs.lists(
    hs.tuples(hs.integers(0, 200 * W), hs.floats(0.0, 3.5 * W, allow_nan=False)),
    min_size=1, max_size=200)


@given(streams, hs.sampled_from([1.0, 0.25, 28.0]))
def test_prop_ceiling_holds_nothing_is_lost_and_the_naive_calendar_agrees(reqs, rate):
    cal = cal1(rate)
    naive = NaiveCalendar(rate, W)
    for t, a in reqs:
        a *= rate
        wait = book(cal, t, a)
        assert wait >= 0.0
        assert wait == pytest.approx(naive.book(t, a), abs=1e-6)
    c = cal[0]
    fills = ring_fills(cal)
    assert max(fills.values()) <= c.cap
    assert c.booked == pytest.approx(sum(fills.values()) + c.expired + c.beyond)
    assert c.nr_beyond == 0                   # every stream here fits in the horizon
    assert fills == {j: pytest.approx(f) for j, f in naive.fill.items() if j in fills}


@given(hs.lists(hs.tuples(hs.integers(0, 3), hs.integers(0, 2000 * W), hs.floats(0.0, 2.5 * W)),
                min_size=1, max_size=150), hs.sampled_from([1, 4, 16]))
def test_prop_utilisation_equals_the_mean_of_its_window(ops, k):
    """Bookings and queries in any order (times spread over four ring lengths, so bins expire):
    the kept window sum equals the window's bins summed afresh."""
    cal = cal1()
    for kind, t, a in ops:
        if kind:
            book(cal, t, a)
            continue
        u = calendar_utilisation(cal, 0, np.int64(t), k)
        c = cal[0]
        b = t // W
        fills = ring_fills(cal)
        want = sum(fills.get(j, 0.0) for j in range(max(b - k, c.head - NB + 1, 0), b)) / (k * c.cap)
        assert u == pytest.approx(want, rel=1e-9, abs=1e-9)


@settings(max_examples=20)
@given(hs.integers(1, 64), hs.sampled_from([512.0, 4096.0]), hs.floats(0.1, 8.0))
def test_prop_closed_loop_clients_never_beat_the_rate_and_reach_it_when_demand_exceeds_it(
        nclients, size, demand_ratio):
    """Clients issue `size` units back to back (each takes size/rate_client plus its wait), in
    quanta of 20 us run one client after another: the throughput over the run is <= the rate,
    and close to it when the clients together demand more."""
    rate = 28.0
    cal = cal1(rate)
    client_rate = demand_ratio * rate / nclients     # demand of one client, units per ns
    clock = [0] * nclients
    done = 0.0
    horizon = 100_000
    while min(clock) < horizon:
        k = int(np.argmin(clock))
        limit = clock[k] + 20_000
        while clock[k] < limit and clock[k] < horizon:
            wait = book(cal, clock[k], size)
            clock[k] += int(size / client_rate + wait) + 1
            done += size
    span = max(clock)
    assert done <= rate * span + cal[0].cap        # at most one bin's worth over the ceiling
    if demand_ratio > 1.5:
        assert done >= 0.9 * rate * min(clock)
