from django.urls import path

from . import views

urlpatterns = [
    path("", views.orders, name="orders"),
    path("<int:order_id>/pay/", views.pay, name="pay"),
]
