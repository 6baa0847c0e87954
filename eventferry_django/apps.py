from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class EventferryConfig(AppConfig):
    name = "eventferry_django"
    label = "eventferry_django"
    verbose_name = _("Event outbox")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks, schema_checks, task_checks  # noqa: F401  (register the checks)
        from .metrics import connect_signals

        # Counts committed and redriven events; nothing without prometheus_client.
        connect_signals()
