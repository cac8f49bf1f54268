"""The names of the ledger table: its attributes, its index, its rows' key prefixes."""

from __future__ import annotations

# Names defined once: the template's key schema, GSI and TTL attribute are these.
PARTITION_KEY = "pk"
PENDING_INDEX = "pending-by-state"
PENDING_STATE = "pending_state"
STATE_SINCE = "state_since"
TTL_ATTRIBUTE = "expires_at"
SEEN_DELIVERIES = "seen_deliveries"
REOPENS = "reopens"
# Bookkeeping rows share the table under their own key prefixes; job keys are kind#job_id.
_URL_ROW = "url#"  # per-URL resubmission counters of earlier versions (no longer written)
_META_ROW = "meta#"
_CHAIN_ROW = "chain#"
_BOOKKEEPING_PREFIXES = (_URL_ROW, _META_ROW, _CHAIN_ROW)
# The set of lease owners whose attempts hold a strike (see ``leases``).
STRUCK_BY = "struck_by"
