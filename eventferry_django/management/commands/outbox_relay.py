"""``manage.py outbox_relay``: run the relay (the loop itself lives in ``relay.Relay``)."""

from __future__ import annotations

import logging
from typing import Any

from django.core.management.base import CommandError, CommandParser

from ...conf import MAX_BATCHES_IN_FLIGHT
from ...contract import MAX_BATCH
from ...exceptions import ConfigurationError
from ...metrics import METRICS_ADDR, start_metrics_server
from ...relay import Relay, RelayConfig, default_relay_id
from ...relay.config import PROGRESS_INTERVAL
from ...store.outbox import OutboxStore
from ._arguments import (
    add_database_argument,
    database_alias,
    int_range,
    positive_seconds,
    setting_default,
)
from ._base import EventferryCommand


class Command(EventferryCommand):
    help = "Publish outbox events to the configured broker until stopped (SIGTERM/SIGINT)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="Run one pass and exit.")
        parser.add_argument(
            "--until-empty", action="store_true",
            help="Exit when nothing is claimable right now (rows waiting for a retry time "
            "or another relay's lease do not keep it running).",
        )
        parser.add_argument(
            "--batch-size", type=int_range(1, MAX_BATCH),
            help=f"Events claimed per pass (default: {setting_default('BATCH_SIZE')}).",
        )
        parser.add_argument(
            "--batches-in-flight", type=int_range(1, MAX_BATCHES_IN_FLIGHT),
            help="Batches at the broker at once: the relay settles one while the broker "
            f"confirms another (default: {setting_default('BATCHES_IN_FLIGHT')}).",
        )
        parser.add_argument(
            "--poll-interval", type=positive_seconds, default=1.0,
            help="Longest idle sleep in seconds between empty passes (default: %(default)s); "
            "a commit in this process or a PostgreSQL NOTIFY wakes it early.",
        )
        parser.add_argument("--max-events", type=int_range(1),
                            help="Exit after claiming this many events.")
        parser.add_argument(
            "--relay-id", default=default_relay_id(),
            help="Name used in logs (default: host:pid, here %(default)s).",
        )
        parser.add_argument(
            "--progress-interval", type=positive_seconds, default=PROGRESS_INTERVAL,
            metavar="SECONDS",
            help="Log a progress line at INFO this often while there is work "
            "(default: %(default)s).",
        )
        add_database_argument(parser)
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
        alias = database_alias(options)
        if options["once"] and options["until_empty"]:
            raise CommandError("--once and --until-empty exclude each other.")
        if options["metrics_addr"] is not None and options["metrics_port"] is None:
            raise CommandError("--metrics-addr needs --metrics-port.")
        self._configure_logging(options["verbosity"])
        if options["metrics_port"] is not None:
            addr = options["metrics_addr"] or METRICS_ADDR
            try:
                start_metrics_server(options["metrics_port"], addr=addr, using=alias)
            except (ConfigurationError, OSError) as exc:
                raise CommandError(f"Cannot serve metrics on port {options['metrics_port']} "
                                   f"of {addr}: {exc}") from exc
        relay = Relay(RelayConfig.from_settings(
            batch_size=options["batch_size"],
            batches_in_flight=options["batches_in_flight"],
            poll_interval=options["poll_interval"],
            relay_id=options["relay_id"],
            progress_interval=options["progress_interval"],
            once=options["once"],
            until_empty=options["until_empty"],
            max_events=options["max_events"],
        ), store=OutboxStore(alias))
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
        """Show the relay's log on stderr when ``LOGGING`` routes it nowhere: a relay
        started by hand should say what it does. A project's own ``LOGGING`` is left
        alone, except that ``-v 2``/``-v 3`` asks for DEBUG."""
        logger = logging.getLogger("eventferry_django")
        if verbosity >= 2:
            logger.setLevel(logging.DEBUG)
        if logger.hasHandlers():
            return
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: "
                                               "%(message)s"))
        logger.addHandler(handler)
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.INFO if verbosity >= 1 else logging.WARNING)
