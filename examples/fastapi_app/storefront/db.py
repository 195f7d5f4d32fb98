"""The shop's tables and its SQLAlchemy asyncio engine (asyncpg).

River takes the same ``postgresql://`` URL: its own connections serve the
inserts made outside a request's transaction; inside one (``tx=session``) the
job goes through the session's own asyncpg connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import DateTime, String, func
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.pool import NullPool


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "orders"

    id: Mapped[int] = mapped_column(primary_key=True)
    item: Mapped[str] = mapped_column(String(100))
    quantity: Mapped[int]
    email: Mapped[str] = mapped_column(String(254))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    # Set by the send_receipt job, once it has run.
    receipt_sent_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


def sqlalchemy_url(url: str) -> str:
    """``postgres://``, ``postgresql://`` or ``postgresql+<driver>://`` as SQLAlchemy's asyncpg URL."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.split("+", 1)[0] not in ("postgres", "postgresql"):
        raise ValueError(f"expected a postgresql:// URL, got {url!r}")
    return f"postgresql+asyncpg://{rest}"


@dataclass(frozen=True)
class Database:
    """One engine and its session factory; ``close()`` closes the pool's connections.

    ``pooled=False`` connects per session and keeps nothing open between them:
    for a process with no shutdown step to call ``close()`` in.
    """

    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]

    @classmethod
    def open(cls, url: str, *, pooled: bool = True) -> Database:
        pool = {"pool_pre_ping": True} if pooled else {"poolclass": NullPool}
        engine = create_async_engine(sqlalchemy_url(url), **pool)
        # Rows stay readable after commit (the response is built from them).
        return cls(engine, async_sessionmaker(engine, expire_on_commit=False))

    async def create_tables(self) -> None:
        async with self.engine.begin() as conn:
            await conn.run_sync(Base.metadata.create_all)

    async def close(self) -> None:
        await self.engine.dispose()
