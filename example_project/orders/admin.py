from django.contrib import admin

from .models import CustomerTally, Order, Shipment


@admin.register(Order)
class OrderAdmin(admin.ModelAdmin):
    list_display = ("reference", "customer", "total", "status", "created_at")
    list_filter = ("status",)


@admin.register(CustomerTally)
class CustomerTallyAdmin(admin.ModelAdmin):
    list_display = ("customer", "orders", "spent")


@admin.register(Shipment)
class ShipmentAdmin(admin.ModelAdmin):
    list_display = ("order_reference", "customer", "created_at")
