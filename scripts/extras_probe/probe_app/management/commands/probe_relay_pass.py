"""What a new user does first with the installed wheel: migrate a fresh project, publish
an event in a transaction, run one relay pass; fails unless the event was published."""

from __future__ import annotations

from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from eventferry_django import publish_event
from eventferry_django.models import OutboxEvent, Status


class Command(BaseCommand):
    help = "Migrate, publish one event and relay it once (scripts/check_extras.py)."

    def handle(self, *args: Any, **options: Any) -> None:
        call_command("migrate", verbosity=0, interactive=False)
        with transaction.atomic():
            message_id = publish_event("probe.event", {"n": 1}, aggregate_type="probe",
                                       aggregate_id="probe-1")
        call_command("outbox_relay", "--once")
        status = OutboxEvent.objects.get(message_id=message_id).status
        if status != Status.DONE:
            raise CommandError(f"the relay pass left the event {Status(status).label}, "
                               "not done")
        self.stdout.write("migrated, published one event and relayed it")
