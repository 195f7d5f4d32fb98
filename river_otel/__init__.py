"""OpenTelemetry instrumentation for River clients (``pip install river-python[otel]``).

Needs only ``opentelemetry-api`` at run time; bring your own SDK and exporters::

    from river_otel import OtelMiddleware

    otel = OtelMiddleware()  # global tracer/meter providers and propagator
    river_sync.Client(url, ..., middleware=[otel.work], insert_middleware=[otel.insert_many])
    river_trio.Client(url, ..., middleware=[otel.work_async], insert_middleware=[otel.insert_many_async])
"""

from river_db.version import package_version
from river_otel.middleware import METADATA_KEY, OtelMiddleware

__version__ = package_version()

__all__ = ["METADATA_KEY", "OtelMiddleware"]
