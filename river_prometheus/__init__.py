"""Prometheus metrics for River clients (``pip install river-python[prometheus]``).

One ``RiverMetrics`` serves every client of a process, whichever the driver::

    from river_prometheus import RiverMetrics, make_asgi_app

    metrics = RiverMetrics()  # a registry of its own; RiverMetrics(prometheus_client.REGISTRY) to share
    metrics.watch_database("postgresql://...")  # job counts and queue ages, read at scrape time
    river_sync.Client(url, ..., middleware=[metrics.work], insert_middleware=[metrics.insert_many])
    river_asyncio.Client(url, ..., middleware=[metrics.work_async],
                         insert_middleware=[metrics.insert_many_async])
    app.mount("/metrics", make_asgi_app(metrics.registry))  # FastAPI, Starlette

``river work MODULE:ATTR --metrics-port 9090`` does all of this for a worker process.
"""

from river_db.version import package_version
from river_prometheus.apps import make_asgi_app, make_wsgi_app
from river_prometheus.database import DatabaseCollector, DatabaseReading, read_database
from river_prometheus.process import DEFAULT_BUCKETS, RiverMetrics

__version__ = package_version()

__all__ = [
    "DEFAULT_BUCKETS",
    "DatabaseCollector",
    "DatabaseReading",
    "RiverMetrics",
    "make_asgi_app",
    "make_wsgi_app",
    "read_database",
]
