"""The listener probe's pieces and the ``notifications`` argument, without a database."""

from __future__ import annotations

import pytest

from river_db.listen_probe import ListenProbe, notifications_setting
from river_protocol.errors import ValidationError


def test_notifications_setting() -> None:
    assert notifications_setting(True, "postgres") == (True, None)
    assert notifications_setting(False, "sqlite") == (False, None)
    url = "postgresql://u@direct:5432/app"
    assert notifications_setting(url, "postgres") == (True, url)
    with pytest.raises(ValidationError, match="Postgres database"):
        notifications_setting(url, "sqlite")
    with pytest.raises(ValidationError, match="postgresql:// URL"):
        notifications_setting("sqlite:///x.db", "postgres")
    with pytest.raises(ValidationError, match="True, False or"):
        notifications_setting(1, "postgres")  # type: ignore[arg-type]


def test_a_probe_is_private_and_fits_postgres_channel_names() -> None:
    a, b = ListenProbe(), ListenProbe()
    assert a.topic != b.topic and a.token != b.token
    assert a.answered_by(a.token) and not a.answered_by(b.token)
    assert a.fits("public.")
    assert not a.fits("s" * 60 + ".")
