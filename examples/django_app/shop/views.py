"""``POST /orders/`` saves an order and enqueues its receipt job in one transaction."""

from __future__ import annotations

from django.db import connection, transaction
from django.http import HttpRequest, HttpResponse, JsonResponse

from shop.jobs import SendReceipt, inserter
from shop.models import Order


def place_order(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        return HttpResponse(status=405)
    with transaction.atomic():
        order = Order.objects.create(item=request.POST.get("item", ""))
        job = inserter().insert(SendReceipt(order_id=order.id), tx=connection).job
        if request.POST.get("fail_after_enqueue"):
            # Anything failing later in the request rolls back the order and its job together.
            raise RuntimeError("payment declined")
    return JsonResponse({"order": order.id, "job": job.id}, status=201)
