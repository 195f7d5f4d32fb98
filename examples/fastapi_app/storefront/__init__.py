"""A small shop on FastAPI: an order row and its receipt job in one SQLAlchemy AsyncSession transaction.

``storefront.app`` is the web service (``uvicorn --factory storefront.app:create_app``),
``storefront_worker`` (next to this package) the worker process for ``river work``.
"""
