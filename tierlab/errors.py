"""Errors raised for bad input, before any simulation work starts."""


class TierlabError(Exception):
    """Base class: a message that names the bad key (or file:line) and what is accepted."""

    def one_line(self) -> str:
        """The message on one line, as the command line prints it (`tierlab: error: ...`)."""
        return " ".join(str(self).split())


class ConfigError(TierlabError, ValueError):
    """A bad configuration key or value (knob, machine, workload, param, sweep spec)."""


class TraceError(TierlabError, ValueError):
    """A malformed trace file; the message names file:line and what was expected."""


class CapacityError(TierlabError, MemoryError):
    """The simulation state would not fit in the host's available memory."""


class TimeRulesWarning(UserWarning):
    """A run took a step longer than the time rules bound (core/time_rules.py MAX_STEP_NS), and a lock calendar was
    outrun: some lock holds were served without their wait. The message names the step's length."""


class LimitedEffectWarning(UserWarning):
    """A valid knob combination whose effect is limited in a way that is easy to miss (e.g. migrc=on
    with migration_entry_ad=1: written anon memory is never deferred); the message says why."""
