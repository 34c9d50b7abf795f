"""Moved to `tidemark.paimon.limits`; kept as an import path for existing
users."""

from tidemark.paimon.limits import *  # noqa: F401,F403
from tidemark.paimon.limits import BatchGuard, TriggerLimits  # noqa: F401
