"""A stand-in payment provider: the card token ``tok_declined`` is declined, as test cards are."""

from __future__ import annotations

DECLINED = "tok_declined"


class PaymentDeclined(Exception):
    pass


async def charge(card: str, *, order_id: int, amount_cents: int) -> None:
    if card == DECLINED:
        raise PaymentDeclined(f"card declined for order {order_id} ({amount_cents} cents)")
