"""``python -m storefront.create_tables``: create the shop's tables.

River's tables come from ``river migrate-up``.
"""

from __future__ import annotations

import asyncio

from storefront.db import Database
from storefront.settings import database_url


async def main() -> None:
    database = Database.open(database_url())
    try:
        await database.create_tables()
    finally:
        await database.close()
    print("created the shop's tables")


if __name__ == "__main__":
    asyncio.run(main())
