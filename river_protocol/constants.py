"""River's defaults (docs/protocol.md §1) as named values.

Durations are ``timedelta``; counts are ``int``. Machines take these as
defaults for their settings, so a client option and the spec share one name.
"""

from __future__ import annotations

import re
from datetime import timedelta

# ---------------------------------------------------------------- jobs and queues
MAX_ATTEMPTS_DEFAULT = 25
PRIORITY_DEFAULT = 1
PRIORITY_MIN = 1
PRIORITY_MAX = 4
QUEUE_DEFAULT = "default"
ALL_QUEUES = "*"
MAX_ATTEMPTED_BY = 100
QUEUE_MAX_WORKERS_MIN = 1
QUEUE_MAX_WORKERS_MAX = 10_000
JOB_TIMEOUT_DEFAULT = timedelta(seconds=60)
# A job timeout of -1 means "no timeout", mirroring Go's -1 duration.
JOB_TIMEOUT_NONE = timedelta(microseconds=-1)
STUCK_THRESHOLD = timedelta(seconds=10)
OUTPUT_SIZE_LIMIT = 32 * 1024 * 1024
HOT_STATEMENT_TIMEOUT = timedelta(seconds=10)

# ---------------------------------------------------------------- producer
FETCH_COOLDOWN_DEFAULT = timedelta(milliseconds=100)
FETCH_COOLDOWN_MIN = timedelta(milliseconds=1)
FETCH_POLL_INTERVAL_DEFAULT = timedelta(seconds=1)
FETCH_POLL_INTERVAL_MIN = timedelta(milliseconds=1)
FETCH_POLL_JITTER_MIN = timedelta(milliseconds=10)
QUEUE_STATUS_REFRESH_INTERVAL = timedelta(minutes=10)
QUEUE_SETTINGS_POLL_INTERVAL = timedelta(seconds=2)
START_STAGGER_MAX = timedelta(seconds=1)

# ---------------------------------------------------------------- completer
COMPLETER_TICK = timedelta(milliseconds=50)
COMPLETER_FLUSH_THRESHOLD = 100
COMPLETER_FLUSH_EVERY_NTH_TICK = 5
COMPLETER_SUB_BATCH_MAX = 5_000
COMPLETER_BACKLOG_SIGNAL = 5_000
COMPLETER_BACKPRESSURE_HIGH = 10_000
COMPLETER_BACKPRESSURE_LOW = 5_000
COMPLETER_MAX_ATTEMPTS = 3
# The completer's retry back-off is this unit times 1, 2, 4 (then again): the service back-off.
COMPLETER_BACKOFF_UNIT = timedelta(seconds=1)
# A stopping completer retries transient failures this long before it reports them dropped:
# long enough for a pooler restart or a failover, short enough that a stop in an outage ends.
COMPLETER_STOP_GRACE = timedelta(seconds=30)

# ---------------------------------------------------------------- leadership
ELECT_INTERVAL = timedelta(seconds=5)
ELECT_INTERVAL_JITTER = timedelta(seconds=1)
LEADER_TTL = timedelta(seconds=15)
LEADER_TRUST_MARGIN = timedelta(seconds=1)
ELECT_TIMEOUT = timedelta(seconds=5)
ELECT_WAKEUP_JITTER = timedelta(milliseconds=50)
ELECT_BACKOFF_RESET = 7
REELECT_BACKOFF_RESET = 3
RESIGN_MAX_ATTEMPTS = 3

# ---------------------------------------------------------------- maintenance
SCHEDULER_INTERVAL = timedelta(seconds=5)
RESCUER_INTERVAL = timedelta(seconds=30)
# Ours: the workflow sweeper's sweep of pending workflow tasks (river_protocol.machines.
# workflow_sweeper, run whoever leads River); dependents of tasks that another client (a Go
# one) finalized start within it.
WORKFLOW_PROMOTER_INTERVAL = timedelta(seconds=1)
RESCUE_AFTER_DEFAULT = timedelta(hours=1)
JOB_CLEANER_INTERVAL = timedelta(seconds=30)
CANCELLED_RETENTION_DEFAULT = timedelta(hours=24)
COMPLETED_RETENTION_DEFAULT = timedelta(hours=24)
DISCARDED_RETENTION_DEFAULT = timedelta(days=7)
QUEUE_CLEANER_INTERVAL = timedelta(hours=1)
QUEUE_RETENTION = timedelta(hours=24)
REINDEX_TIMEOUT = timedelta(minutes=1)
REINDEX_DEFAULT_INDEXES = (
    "river_job_args_index",
    "river_job_kind",
    "river_job_metadata_index",
    "river_job_pkey",
    "river_job_prioritized_fetching_index",
    "river_job_state_and_finalized_at_index",
    "river_job_unique_idx",
)
NOTIFICATION_CLEANER_INTERVAL = timedelta(minutes=1)
NOTIFICATION_RETENTION = timedelta(minutes=5)
MAINTENANCE_BATCH_SIZE = 10_000
MAINTENANCE_BATCH_SIZE_REDUCED = 1_000
MAINTENANCE_BREAKER_LIMIT = 3
MAINTENANCE_BREAKER_WINDOW = timedelta(minutes=10)
MAINTENANCE_BATCH_TIMEOUT = timedelta(seconds=30)
MAINTENANCE_BATCH_PAUSE_MIN = timedelta(milliseconds=50)
MAINTENANCE_BATCH_PAUSE_MAX = timedelta(seconds=1)
MAINTENANCE_START_ATTEMPTS = 3
# Jobs made available by the scheduler are announced only if due within this margin.
SCHEDULER_NOTIFY_MARGIN = timedelta(milliseconds=5)

# ---------------------------------------------------------------- periodic jobs
PERIODIC_DUE_MARGIN = timedelta(milliseconds=100)
PERIODIC_IDLE_WAIT = timedelta(hours=24)
PERIODIC_ID_MAX_LEN = 128

# ---------------------------------------------------------------- notifier
NOTIFIER_PING_INTERVAL = timedelta(seconds=5)
NOTIFIER_CONNECT_TIMEOUT = timedelta(seconds=10)
NOTIFIER_BUFFER = 1_000
SQLITE_LISTENER_POLL = timedelta(milliseconds=50)

# ---------------------------------------------------------------- names
CLIENT_ID_MAX_LEN = 100
SCHEMA_NAME_MAX_LEN = 46
TAG_MAX_LEN = 255
QUEUE_NAME_MAX_LEN = 64
RETRY_JITTER_FRACTION = 0.1

KIND_RE = re.compile(r"\A[\w][\w\-\[\]<>\/.·:+]+\Z", re.ASCII)
QUEUE_NAME_RE = re.compile(r"^(?:[a-z0-9])+(?:[_|\-]?[a-z0-9]+)*$")
TAG_RE = re.compile(r"\A[\w][\w\-]+[\w]\Z", re.ASCII)
SCHEMA_NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
