"""``manage.py outbox_relay``: run the relay (the loop itself lives in ``relay.Relay``)."""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from ...conf import MAX_BATCH_SIZE, MAX_BATCHES_IN_FLIGHT, get_settings
from ...exceptions import ConfigurationError
from ...metrics import METRICS_ADDR, start_metrics_server
from ...relay import Relay, RelayConfig
from ...store.outbox import OutboxStore
from ._arguments import int_range, positive_seconds


class Command(BaseCommand):
    help = "Publish outbox events to the configured broker until stopped (SIGTERM/SIGINT)."

    def add_arguments(self, parser: CommandParser) -> None:
        settings = get_settings()
        parser.add_argument("--once", action="store_true", help="Run one pass and exit.")
        parser.add_argument(
            "--until-empty", action="store_true",
            help="Exit when nothing is claimable right now (rows waiting for a retry time "
            "or another relay's lease do not keep it running).",
        )
        parser.add_argument(
            "--batch-size", type=int_range(1, MAX_BATCH_SIZE), default=settings.batch_size,
            help="Events claimed per pass (default: EVENTFERRY['BATCH_SIZE'] = %(default)s).",
        )
        parser.add_argument(
            "--batches-in-flight", type=int_range(1, MAX_BATCHES_IN_FLIGHT),
            default=settings.batches_in_flight,
            help="Batches at the broker at once: the relay settles one while the broker "
            "confirms another (default: EVENTFERRY['BATCHES_IN_FLIGHT'] = %(default)s).",
        )
        parser.add_argument(
            "--poll-interval", type=positive_seconds, default=1.0,
            help="Longest idle sleep in seconds between empty passes (default: %(default)s); "
            "a commit in this process or a PostgreSQL NOTIFY wakes it early.",
        )
        parser.add_argument("--max-events", type=int_range(1),
                            help="Exit after claiming this many events.")
        parser.add_argument(
            "--relay-id", default=f"{socket.gethostname()}:{os.getpid()}",
            help="Name used in logs (default: host:pid, here %(default)s).",
        )
        parser.add_argument(
            "--database", default=settings.database,
            help="Database alias of the outbox (default: %(default)s).",
        )
        parser.add_argument(
            "--metrics-port", type=int_range(1, 65535), default=None, metavar="PORT",
            help="Serve Prometheus metrics (relay counters and backlog gauges) on "
            "http://ADDR:PORT/metrics from this process; needs prometheus_client "
            "(default: off).",
        )
        parser.add_argument(
            "--metrics-addr", default=None, metavar="ADDR",
            help="Interface the metrics server listens on, with --metrics-port: an address "
            f"or host name; 0.0.0.0 or :: for every interface (default: {METRICS_ADDR}, "
            "this machine only).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["database"] not in connections:
            raise CommandError(f"Unknown database alias {options['database']!r}.")
        if options["once"] and options["until_empty"]:
            raise CommandError("--once and --until-empty exclude each other.")
        if options["metrics_addr"] is not None and options["metrics_port"] is None:
            raise CommandError("--metrics-addr needs --metrics-port.")
        self._configure_logging(options["verbosity"])
        if options["metrics_port"] is not None:
            addr = options["metrics_addr"] or METRICS_ADDR
            try:
                start_metrics_server(options["metrics_port"], addr=addr,
                                     using=options["database"])
            except (ConfigurationError, OSError) as exc:
                raise CommandError(f"Cannot serve metrics on port {options['metrics_port']} "
                                   f"of {addr}: {exc}") from exc
        relay = Relay(RelayConfig.from_settings(
            batch_size=options["batch_size"],
            batches_in_flight=options["batches_in_flight"],
            poll_interval=options["poll_interval"],
            relay_id=options["relay_id"],
            once=options["once"],
            until_empty=options["until_empty"],
            max_events=options["max_events"],
        ), store=OutboxStore(options["database"]))
        relay.install_signal_handlers()
        stats = relay.run()
        if options["verbosity"] >= 1:
            self.stdout.write(
                f"relay {options['relay_id']}: {stats.published} published, "
                f"{stats.retried} retried, {stats.dead} dead, {stats.released} released "
                f"in {stats.passes} passes"
            )

    @staticmethod
    def _configure_logging(verbosity: int) -> None:
        logger = logging.getLogger("eventferry")
        if not logger.handlers and not logging.getLogger().handlers:
            handler = logging.StreamHandler()
            handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
            logger.addHandler(handler)
        logger.setLevel(logging.DEBUG if verbosity >= 2 else logging.INFO)

