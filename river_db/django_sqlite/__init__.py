"""A Django database backend: Django's SQLite backend on sqlean-py's SQLite (>= 3.45).

``ENGINE = "river_db.django_sqlite"``. See ``base``.
"""
