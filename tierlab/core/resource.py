"""Contended resources in virtual time: a time-slotted capacity calendar per resource.

What it models. Anything that serves a bounded amount of work per unit of time and is shared by
the simulated entities: a node's memory bandwidth (bytes per ns, cost.py), a lock (ns of hold per
ns: at most one holder at a time), a device. It is not a kernel object; the users name the kernel
objects they model.

Why a calendar. Tasks on CPUs and kswapd run in quanta (`quantum_ns`), so their clocks interleave
out of order by up to about a quantum: an entity that runs later in host order may book work at an
earlier virtual time than one that ran before it. A FIFO `busy_until` server would make that
entity wait behind the first one's whole quantum even at low load; a utilisation window that sets
the next window's latency lags a window and overshoots. The calendar indexes capacity by virtual
time, so every client finds the room of its own time whatever the host order.

The calendar. Virtual time is cut into bins of width w = 2**bin_shift ns; each bin holds at most
cap = rate * w units (bytes, ns of hold). A request of `amount` units at time t fills bins from
t's bin b onward:

    - if bin b has room for all of it, it is served without waiting (wait 0);
    - otherwise it fills b, then the following bins, up to bin e where the filling ends; it
      completes at end = start(e) + w * fill(e) / cap (its last unit sits behind what bin e
      already held), and it waits max(0, end - (t + amount / rate)).

So the bytes (or ns of hold) per bin never exceed the bin's capacity, for any number of clients
in any order; at low load nobody waits, whatever the order; at saturation requests serialise: a
request finding its bin full waits for the next bin with room. Within a bin the order of requests
is not known (that is what makes out-of-order clients work): contention shows only once a bin's
capacity is used up, so below saturation the users add their own expected-waiting curve from the
utilisation of recent bins (`calendar_utilisation`): cost.py the machine's loaded-latency curve,
locks a queueing formula.

The ring. Bins live in a ring of nbins slots (a power of two, chosen per calendar array)
indexed by absolute bin number modulo the ring size; each slot carries the absolute bin number it holds (`bin_tag`) and is reset lazily when a
later bin claims it (its fill is added to `expired`, so every booked unit stays accounted for:
booked == sum of the ring's fills + expired + beyond). The ring covers the nbins bins up to the
newest bin touched (`head`): its horizon is nbins * w of virtual time. Every calendar has CAL_BINS
bins (one record type); its user chooses w small enough for the precision wanted (a request finds
room or not per bin) and large enough that the horizon is far more than the spread of the
clients' clocks, which the run loop's time rules bound by a quantum plus the longest single step
of one entity (a kswapd or direct-reclaim batch that swaps out 32 pages, ~330 us, a move_pages
migration batch, ~460 us; a read's wait
is not a step, the task sleeps through it): locks 2.1 ms, at least 4x that lead with the largest
quantum config accepts, memory bandwidth 134 ms, devices 537 ms. A request at a time older than the
horizon (its bin's slot already holds a newer bin) is counted in `nr_beyond`: its bins are gone,
and whoever moved `head` that far ahead filled them (a device's backlog of requests queued longer
than the ring), so they are taken as full and it is served from the oldest bin the ring holds.
For memory bandwidth and locks that cannot happen within the time rules, and Simulation.run
stops with an error if it did (a lock outrun by a system call that moves many pages, one step of
any length, is warned about instead); calendar_fill_bin (a caller that kept a bin's room itself) adds a unit older
than the horizon to `beyond` unchecked. A
request larger than the whole ring's capacity wraps over its own bins: the ceiling then holds only
over the last horizon (documented, not refused: no user books that much at once).

A full-run hint (`full_lo`, `full_hi`: absolute bins all known full) lets a request at saturation
jump over the backlog instead of walking it bin by bin; it changes no result (the tests compare
with a naive dict-of-bins calendar).

Functions (a calendar is one record of an array of calendar_dtype(nbins); they take the array and
an index):
    calendar_book(cal, r, t, amount) -> wait   room in t's bin is a few loads and stores
    calendar_utilisation(cal, r, t, k)          mean fill / cap of the k bins before t's bin
    calendar_room(cal, r, j), calendar_fill_bin(cal, r, j, amount)
                                               for a caller that keeps one bin's room itself
    calendar_array(rates, bin_ns[, nbins])     a fresh array (Python side; rings of CAL_BINS bins)
"""
from __future__ import annotations

import numpy as np
from ._jit import jit, jit_inline

CAL_BINS = 8192     # every calendar's ring (memory bandwidth, locks, devices): one record type, so
                    # calendar_book compiles once; 128 KiB a calendar. Users choose the bin width.


def calendar_dtype(nbins: int) -> np.dtype:
    """The record of one calendar with a ring of `nbins` bins (a power of two; 16 bytes a bin)."""
    if nbins < 2 or nbins & (nbins - 1):
        raise ValueError(f"calendar ring size must be a power of two >= 2, got {nbins}")
    return np.dtype([
        ("rate", np.float64),       # units served per ns (bytes/ns for memory, 1.0 for a lock)
        ("cap", np.float64),        # units per bin: rate * 2**bin_shift
        ("bin_shift", np.int64),    # bin width w = 2**bin_shift ns
        ("head", np.int64),         # newest absolute bin touched (-1: none)
        ("full_lo", np.int64),      # absolute bins [full_lo, full_hi) are known full (a hint)
        ("full_hi", np.int64),
        ("u_end", np.int64),        # calendar_utilisation's window: bins [u_end - u_k, u_end) (-1: none)
        ("u_k", np.int64),
        ("u_sum", np.float64),      # units in the window's bins, kept up to date by every booking
        ("nr_requests", np.int64),
        ("nr_waits", np.int64),     # requests that waited (spilled past their own bin and ended late)
        ("booked", np.float64),     # units booked in all
        ("wait_ns", np.float64),    # waits returned in all
        ("expired", np.float64),    # units in bins the ring has since reused
        ("beyond", np.float64),     # units of requests older than the horizon (served unchecked)
        ("nr_beyond", np.int64),
        ("bin_tag", np.int64, (nbins,)),    # absolute bin number a slot holds (-1: none)
        ("bin_fill", np.float64, (nbins,)),  # units booked in that bin, <= cap
    ], align=True)


def bin_shift_for(bin_ns: int) -> int:
    """log2 of a bin width in ns, which must be a power of two (bins are found with a shift)."""
    shift = int(bin_ns).bit_length() - 1
    if bin_ns < 1 or (1 << shift) != bin_ns:
        raise ValueError(f"calendar bin width must be a power of two ns, got {bin_ns}")
    return shift


def calendar_array(rates, bin_ns: int, nbins: int = CAL_BINS) -> np.ndarray:
    """Empty calendars, one per rate (units per ns), with rings of `nbins` bins of `bin_ns` ns (both
    powers of two). A recarray, so `cal[r].bin_fill` reads the same in numba and in plain Python."""
    shift = bin_shift_for(bin_ns)
    cal = np.zeros(len(rates), calendar_dtype(nbins))
    cal["rate"] = rates
    cal["cap"] = np.asarray(rates, np.float64) * float(1 << shift)
    cal["bin_shift"] = shift
    cal["head"] = -1
    cal["u_end"] = -1
    cal["bin_tag"] = -1
    return cal.view(np.recarray)


@jit_inline
def calendar_book(cal, r, t, amount):
    """Book `amount` units on calendar r at virtual time t (ns). Returns the wait in ns (0.0 when
    t's bin has room). The common case is inlined; a spill goes out of line."""
    c = cal[r]
    tags = c.bin_tag            # the nested arrays once: numba builds a view per attribute access
    fills = c.bin_fill
    b = np.int64(t) >> c.bin_shift
    slot = b & (tags.shape[0] - 1)
    if b > c.head:
        # a bin past the newest one (a client moving on in time): claim its slot, as the general
        # case would (no bin past `head` is in the full-run hint)
        claim_slot(c, tags, fills, slot, b)
    if tags[slot] == b and amount <= c.cap - fills[slot]:
        fills[slot] += amount
        window_add(c, b, amount)
        c.booked += amount
        c.nr_requests += 1
        return 0.0
    return calendar_book_slow(cal, np.int64(r), np.int64(t), np.float64(amount))


@jit
def calendar_book_slow(cal, r, t, amount):
    """calendar_book's general case: a bin to (re)claim, a spill into later bins, or a request
    older than the horizon."""
    c = cal[r]
    tags = c.bin_tag
    fills = c.bin_fill
    nb = tags.shape[0]
    shift = c.bin_shift
    cap = c.cap
    b0 = t >> shift
    b = b0
    c.booked += amount
    c.nr_requests += 1
    if b <= c.head - nb:
        # its bins are gone: whoever moved `head` this far ahead filled them (a device's backlog
        # longer than the ring), so they are taken as full and it fills from the oldest bin held
        c.nr_beyond += 1
        b = c.head - nb + 1
    j = b
    left = amount
    while True:
        if j >= c.full_lo and j < c.full_hi:
            j = c.full_hi
        slot = j & (nb - 1)
        if tags[slot] != j:                 # a slot last used by an older bin: reset it lazily
            claim_slot(c, tags, fills, slot, j)
        room = cap - fills[slot]
        if left <= room:
            fills[slot] += left
            window_add(c, j, left)
            break
        left -= room
        fills[slot] = cap
        window_add(c, j, room)
        j += 1
    # bins b .. j-1 are full now, and j too if the request filled it exactly
    last = fills[j & (nb - 1)]
    hi = j + 1 if last >= cap else j
    if hi > b:
        if b <= c.full_hi and hi >= c.full_lo:
            c.full_lo = min(c.full_lo, b)
            c.full_hi = max(c.full_hi, hi)
        elif b > c.full_hi:
            c.full_lo = b
            c.full_hi = hi
    if j == b0:
        return 0.0
    w = np.float64(np.int64(1) << shift)
    end = np.float64(j << shift) + w * last / cap
    wait = end - (np.float64(t) + amount / c.rate)
    if wait <= 0.0:
        return 0.0
    c.nr_waits += 1
    c.wait_ns += wait
    return wait


@jit_inline
def calendar_room(cal, r, j):
    """Units bin j can still take (0.0 for a bin older than the horizon)."""
    c = cal[r]
    nb = c.bin_tag.shape[0]
    if c.bin_tag[j & (nb - 1)] == j:
        return c.cap - c.bin_fill[j & (nb - 1)]
    if j <= c.head - nb:
        return 0.0
    return c.cap


@jit
def calendar_fill_bin(cal, r, j, amount):
    """Add `amount` units to bin j, claiming its slot if need be, without a capacity check: for a
    caller that took them out of the bin's room (calendar_room) while it held the bin (cost.py
    keeps one bin's room per node for the per-access path and writes it back here)."""
    c = cal[r]
    tags = c.bin_tag
    fills = c.bin_fill
    nb = tags.shape[0]
    c.booked += amount
    if j <= c.head - nb:
        c.beyond += amount
        c.nr_beyond += 1
        return
    slot = j & (nb - 1)
    if tags[slot] != j:
        claim_slot(c, tags, fills, slot, j)
    fills[slot] += amount
    window_add(c, j, amount)


@jit_inline
def claim_slot(c, tags, fills, slot, j):
    """Give bin j the ring slot an older bin held (the lazy reset): the old bin's units leave the
    ring (expired) and the utilisation window."""
    window_add(c, tags[slot], -fills[slot])
    c.expired += fills[slot]
    fills[slot] = 0.0
    tags[slot] = j
    if j > c.head:
        c.head = j


@jit_inline
def window_add(c, j, delta):
    """Keep calendar_utilisation's window sum: `delta` units went into (or out of) bin j."""
    if j < c.u_end and j >= c.u_end - c.u_k:
        c.u_sum += delta


@jit_inline
def calendar_utilisation(cal, r, t, nbins):
    """Mean utilisation (fill / cap) of the `nbins` complete bins before t's bin: the throughput
    delivered over the last nbins * w ns, as a fraction of the rate. The window's sum is kept as
    bookings land in it and slid bin by bin as t moves on (O(1) per bin reached; a jump back or
    far ahead sums the window afresh), so a client that books into a window bin later (out of
    order) is seen at once."""
    c = cal[r]
    b = np.int64(t) >> c.bin_shift
    if nbins == c.u_k:
        if b == c.u_end:
            return c.u_sum / (np.float64(nbins) * c.cap)
        if b == c.u_end + 1 and b - nbins > c.head - c.bin_tag.shape[0]:
            # one bin on (the common step, inlined): bin u_end comes in, bin u_end - k goes out
            tags = c.bin_tag
            fills = c.bin_fill
            m = tags.shape[0] - 1
            tot = c.u_sum
            if tags[(b - 1) & m] == b - 1:
                tot += fills[(b - 1) & m]
            out = b - 1 - nbins
            if out >= 0 and tags[out & m] == out:
                tot -= fills[out & m]
            c.u_end = b
            c.u_sum = tot
            return max(0.0, tot) / (np.float64(nbins) * c.cap)
    return calendar_utilisation_slow(cal, np.int64(r), b, np.int64(nbins))


@jit
def calendar_utilisation_slow(cal, r, b, nbins):
    c = cal[r]
    tags = c.bin_tag
    fills = c.bin_fill
    nb = tags.shape[0]
    oldest = c.head - nb + 1             # the oldest bin the ring still holds
    if (nbins == c.u_k and c.u_end < b and b <= c.u_end + nbins
            and c.u_end - nbins >= oldest):
        tot = c.u_sum                    # slide: bins [u_end, b) come in, [u_end - k, b - k) go out
        for j in range(c.u_end, b):
            if j >= 0 and tags[j & (nb - 1)] == j:
                tot += fills[j & (nb - 1)]
        for j in range(c.u_end - nbins, b - nbins):
            if j >= 0 and tags[j & (nb - 1)] == j:
                tot -= fills[j & (nb - 1)]
    else:
        tot = 0.0
        for j in range(max(b - nbins, oldest, 0), b):
            if tags[j & (nb - 1)] == j:
                tot += fills[j & (nb - 1)]
    c.u_end = b
    c.u_k = nbins
    c.u_sum = tot
    return max(0.0, tot) / (np.float64(nbins) * c.cap)
