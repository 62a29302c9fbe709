"""Refusals of the services, as domain errors.

Services never speak the wire: they raise these, and the dispatcher answers each
with the catalogue error of the same name. A refusal is declared once, as its row of
the error catalogue; the classes here are generated from those rows (in the store,
which raises some of them for its SQL functions). A service that wants a more
specific refusal subclasses one of them and so keeps its name (``UserNotFound`` is a
``UserIdInvalid``).
"""

from __future__ import annotations

from telesrv.store.db import UNAVAILABLE_ERRORS as UNAVAILABLE_ERRORS
from telesrv.store.refusal import DomainError as DomainError
from telesrv.store.refusals import *  # noqa: F403

# UNAVAILABLE_ERRORS (re-exported for rpc, which may not import the store): what a
# request gets when PostgreSQL or Redis does not answer in time; answered as TIMEOUT.
