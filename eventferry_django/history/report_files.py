"""The report's files: ``figures.csv`` (every figure, one per line), PNG plots drawn
with matplotlib, and ``index.html`` that shows them with the tables."""

from __future__ import annotations

import csv
import datetime as dt
import os
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from django.template import Context, Engine
from matplotlib.ticker import FuncFormatter, NullFormatter

from .figures import PERCENTILES, Delivery, Figures

CSV_COLUMNS = ("topic", "hour", "figure", "key", "value")
LATENCY_FIGURES = tuple(f"latency_p{round(p * 100)}_ms" for p in PERCENTILES)
TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


def hour_text(hour: dt.datetime | None) -> str:
    """An hour as the CSV and the page write it; empty for the whole window."""
    return "" if hour is None else hour.strftime("%Y-%m-%dT%H:00Z")


def csv_rows(figures: Figures) -> list[tuple[str, str, str, str, str]]:
    rows: list[tuple[str, str, str, str, str]] = []
    for d in [*figures.topics, *figures.hours]:
        hour = hour_text(d.hour)
        rows += [(d.topic, hour, name, "", str(value))
                 for name, value in (("events", d.events), ("done", d.done), ("dead", d.dead))]
        rows += [(d.topic, hour, name, "", f"{value:.3f}")
                 for name, value in zip(LATENCY_FIGURES, d.latency_ms, strict=True)
                 if value is not None]
    rows += [(c.topic, hour_text(c.hour), "attempts", c.key, str(c.events))
             for c in figures.attempts]
    rows += [(c.topic, hour_text(c.hour), "dead_by_error", c.key, str(c.events))
             for c in figures.dead_errors]
    if figures.erasures is not None:
        rows.append(("", "", "erasures", "", str(figures.erasures)))
    return rows


def _series(deliveries: Sequence[Delivery]) -> dict[str, list[Delivery]]:
    by_topic: dict[str, list[Delivery]] = defaultdict(list)
    for d in deliveries:
        by_topic[d.topic].append(d)
    return by_topic


def _legend(figure: Any, axes: Any) -> None:
    """One legend above the plots, in a row, where it hides no line."""
    handles, labels = axes.get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside upper center", ncols=min(len(labels), 5),
                  fontsize="small", frameon=False)


def _figure(height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(10, height), dpi=100, layout="constrained")


def plot_events(figures: Figures, path: Path) -> None:
    figure = _figure(4)
    axes = figure.subplots()
    for topic, points in sorted(_series(figures.hours).items()):
        axes.plot([p.hour for p in points], [p.events for p in points], marker=".",
                  label=topic)
    axes.set_title("Events per hour (by processed time, UTC)")
    axes.set_ylabel("events")
    axes.grid(alpha=0.3)
    _legend(figure, axes)
    figure.savefig(path)


def plot_latency(figures: Figures, path: Path) -> None:
    figure = _figure(8)
    panels = figure.subplots(len(PERCENTILES), 1, sharex=True)
    series = sorted(_series(figures.hours).items())
    for index, (panel, name) in enumerate(zip(panels, LATENCY_FIGURES, strict=True)):
        for topic, points in series:
            kept = [(p.hour, p.latency_ms[index]) for p in points
                    if p.latency_ms[index] is not None]
            panel.plot([h for h, _ in kept], [v for _, v in kept], marker=".", label=topic)
        panel.set_yscale("log")
        panel.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        panel.yaxis.set_minor_formatter(NullFormatter())
        panel.set_ylabel(f"{name.split('_')[1]} (ms)")
        panel.grid(alpha=0.3, which="both")
    panels[0].set_title("Delivery latency, created -> processed, done events")
    _legend(figure, panels[0])
    figure.savefig(path)


def plot_attempts(figures: Figures, path: Path) -> None:
    totals = [c for c in figures.attempts if c.hour is None]
    topics = sorted({c.topic for c in totals})
    keys = sorted({int(c.key) for c in totals})
    events = {(c.topic, int(c.key)): c.events for c in totals}
    figure = _figure(4)
    axes = figure.subplots()
    width = 0.8 / max(len(topics), 1)
    for index, topic in enumerate(topics):
        axes.bar([k + index * width for k in keys], [events.get((topic, k), 0) for k in keys],
                 width=width, label=topic)
    axes.set_xticks([k + width * (len(topics) - 1) / 2 for k in keys], [str(k) for k in keys])
    axes.set_xlabel("attempts (failed tries before the outcome)")
    axes.set_ylabel("events")
    axes.set_yscale("log")
    axes.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axes.set_title("Attempts distribution")
    _legend(figure, axes)
    figure.savefig(path)


def plot_dead(figures: Figures, path: Path, limit: int = 12) -> None:
    totals = sorted((c for c in figures.dead_errors if c.hour is None),
                    key=lambda c: (-c.events, c.topic, c.key))[:limit]
    figure = _figure(1 + 0.4 * len(totals))
    axes = figure.subplots()
    labels = [f"{c.topic}: {c.key[:70]}" for c in reversed(totals)]
    axes.barh(labels, [c.events for c in reversed(totals)], color="#c0392b")
    axes.set_xlabel("dead events")
    axes.set_title("Dead events by error")
    figure.savefig(path)


def write_report(figures: Figures, out: str) -> None:
    """Write figures.csv, the plots and index.html into ``out`` (created if needed)."""
    import matplotlib

    matplotlib.use("Agg")
    directory = Path(out)
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "figures.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)
        writer.writerows(csv_rows(figures))
    plots = []
    if figures.hours:
        plot_events(figures, directory / "events.png")
        plot_attempts(figures, directory / "attempts.png")
        plots += ["events.png", "attempts.png"]
    if any(d.done for d in figures.hours):
        plot_latency(figures, directory / "latency.png")
        plots.insert(1, "latency.png")
    if figures.dead_errors:
        plot_dead(figures, directory / "dead.png")
        plots.append("dead.png")
    for stale in {"events.png", "latency.png", "attempts.png", "dead.png"} - set(plots):
        if (directory / stale).exists():
            os.remove(directory / stale)
    engine = Engine(dirs=[str(TEMPLATES)], autoescape=True)
    page = engine.get_template("eventferry_django/history_report.html").render(Context({
        "figures": figures,
        "window": (_moment(figures.since) or "the first archived event",
                   _moment(figures.until) or "the last"),
        "generated": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "plots": plots,
        "topics": [_row(d) for d in figures.topics],
        "hours": [_row(d) for d in figures.hours],
        "dead": [{"topic": c.topic, "error": c.key, "events": f"{c.events:,}"}
                 for c in sorted((c for c in figures.dead_errors if c.hour is None),
                                 key=lambda c: (-c.events, c.topic))],
    }))
    (directory / "index.html").write_text(page, encoding="utf-8")


def _moment(value: dt.datetime | None) -> str:
    return "" if value is None else value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _row(d: Delivery) -> dict[str, Any]:
    return {"topic": d.topic, "hour": hour_text(d.hour), "events": f"{d.events:,}",
            "done": f"{d.done:,}", "dead": f"{d.dead:,}",
            "latency": ["" if v is None else f"{v:,.1f}" for v in d.latency_ms]}
