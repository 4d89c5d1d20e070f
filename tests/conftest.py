"""Shared pytest configuration: hypothesis profiles.

`ci` (the default) is derandomized with few examples so the suite is fast and reproducible;
`dev` explores more (HYPOTHESIS_PROFILE=dev pytest tests/test_properties.py).
"""
import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", derandomize=True, max_examples=50, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "dev", max_examples=300, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
