from django.db import models


class Order(models.Model):
    item = models.CharField(max_length=100)
    receipts_sent = models.IntegerField(default=0)
