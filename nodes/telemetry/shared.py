"""Metrics the processes of one server share, so that every scrape of ``GET /metrics`` counts them all.

``phasegraph serve --workers N`` runs N processes behind one port, and a scrape reaches whichever
accepts it first. An OpenTelemetry instrument counts what its own process did, read only when that
process is asked, so no worker could answer for the others. prometheus_client's multiprocess mode is
made for exactly this: each process writes every update of a metric at once to a file of its own
(an mmap in ``PROMETHEUS_MULTIPROC_DIR``), and a scrape on any process adds the files up. Counters and
histograms add every process that ever wrote (a worker killed and replaced keeps its counts, so no
counter goes backwards); gauges (``multiprocess_mode="livesum"``) add the live processes only: a
scrape first drops the gauges of processes that are gone (``mark_process_dead``).

So, when that folder is set, each instrument records twice: into the OpenTelemetry instrument (OTLP
export and the tests' in-memory readers work as before) and into a prometheus_client metric named,
labelled and described as the OpenTelemetry Prometheus exporter does it (with its own mapping),
which ``GET /metrics`` then reads from the files instead of the process's Prometheus reader. What a
scrape reads is written back as that exporter writes it: each series with its family's whole label
set (``""`` for an attribute it lacks), bucket bounds as the instrument gives them (``le="1"``, not
``le="1.0"``), and ``target_info`` of the process that answers.

Rejected: asking the other workers at a scrape (a worker has no address of its own, and a dead one's
counts would be lost with it), and exporting each worker's OpenTelemetry metrics to the files every
few seconds (a scrape would read them that old).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import prometheus_client
from opentelemetry.context import Context
from opentelemetry.exporter.prometheus._mapping import map_unit, sanitize_attribute, sanitize_full_name
from opentelemetry.metrics import Counter, Histogram, Meter, UpDownCounter
from opentelemetry.sdk.resources import Resource
from opentelemetry.util.types import Attributes, AttributeValue
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.registry import CollectorRegistry
from prometheus_client.utils import floatToGoString

#: Each family, by its Prometheus name (one per process: two metrics of one name would overwrite each
#: other's values in the process's file).
_families: dict[str, _Family] = {}
#: Each histogram's bucket bounds as the exporter writes them, by the text the files keep them in.
_bounds: dict[str, dict[str, str]] = {}
_making = threading.Lock()


class SharedMeter:
    """Makes instruments of ``meter`` that also write the server's shared files."""

    def __init__(self, meter: Meter) -> None:
        self._meter = meter
        self._scope = {
            "otel_scope_name": meter.name,
            "otel_scope_schema_url": meter.schema_url or "",
            "otel_scope_version": meter.version or "",
        }
        if not _families:  # a dead process's gauges, left under this pid, must not add to this one's
            mark_process_dead(os.getpid())

    def create_counter(self, name: str, unit: str = "", description: str = "") -> Counter:
        """A counter (a Prometheus counter)."""
        family = self._family(prometheus_client.Counter, CounterMetricFamily, name, unit, description)
        return _Counter(self._meter.create_counter(name, unit, description), family)

    def create_up_down_counter(self, name: str, unit: str = "", description: str = "") -> UpDownCounter:
        """An up-down counter (a Prometheus gauge, summed over the live processes)."""
        family = self._family(prometheus_client.Gauge, GaugeMetricFamily, name, unit, description,
                              multiprocess_mode="livesum")  # fmt: skip
        return _UpDownCounter(self._meter.create_up_down_counter(name, unit, description), family)

    def create_histogram(self, name: str, unit: str = "", description: str = "", *,
                         explicit_bucket_boundaries_advisory: Sequence[float]) -> Histogram:  # fmt: skip
        """A histogram with these bucket bounds."""
        bounds = explicit_bucket_boundaries_advisory
        family = self._family(prometheus_client.Histogram, HistogramMetricFamily, name, unit, description,
                              buckets=bounds)  # fmt: skip
        _bounds[family.name] = {floatToGoString(bound): f"{bound}" for bound in bounds}
        made = self._meter.create_histogram(
            name, unit, description, explicit_bucket_boundaries_advisory=bounds
        )
        return _Histogram(made, family)

    def _family(self, kind: type[MetricWrapperBase], exported: Callable[..., Metric], name: str, unit: str,
                description: str, **options: Any) -> _Family:  # fmt: skip
        # Named as the exporter names it: its mapping of the name and unit, then its family class's
        # (a counter's ``_total`` taken off, the unit appended).
        full = exported(sanitize_full_name(name), description, unit=map_unit(unit)).name
        return _families.setdefault(full, _Family(kind, full, description, self._scope, options))


class _Family:
    """One instrument's metric in the shared files: a prometheus_client metric per set of attribute keys."""

    def __init__(self, kind: type[MetricWrapperBase], name: str, description: str, scope: dict[str, str],
                 options: dict[str, Any]) -> None:  # fmt: skip
        self.name = name
        self._kind, self._description, self._scope, self._options = kind, description, scope, options
        self._made: dict[tuple[str, ...], MetricWrapperBase] = {}

    def series(self, attributes: Attributes) -> Any:
        """The series of these attributes (labels sorted: one metric whatever order a caller gives)."""
        pairs = sorted((attributes or {}).items())
        keys = tuple(key for key, _ in pairs)
        metric = self._made.get(keys)
        if metric is None:
            with _making:  # one metric per set of keys, even when two threads ask at once
                metric = self._made.get(keys)
                if metric is None:
                    labels = [*self._scope, *(sanitize_attribute(key) for key in keys)]
                    metric = self._kind(self.name, self._description, labels, registry=None, **self._options)
                    self._made[keys] = metric
        return metric.labels(*self._scope.values(), *(_label(value) for _, value in pairs))


def _label(value: AttributeValue) -> str:
    """An attribute's value as a label, as the exporter writes it (``true``, ``3``, ``["a"]``)."""
    return value if isinstance(value, str) else json.dumps(value, default=str)


class _Counter(Counter):
    """Adds to the OpenTelemetry counter and to its shared metric."""

    def __init__(self, otel: Counter, shared: _Family) -> None:
        self._otel, self._shared = otel, shared

    def add(self, amount: float, attributes: Attributes = None, context: Context | None = None) -> None:
        """Add ``amount`` (a negative one is dropped, as the SDK drops it)."""
        self._otel.add(amount, attributes, context)
        if amount >= 0:
            self._shared.series(attributes).inc(amount)


class _UpDownCounter(UpDownCounter):
    """Adds to the OpenTelemetry up-down counter and to its shared gauge."""

    def __init__(self, otel: UpDownCounter, shared: _Family) -> None:
        self._otel, self._shared = otel, shared

    def add(self, amount: float, attributes: Attributes = None, context: Context | None = None) -> None:
        """Add ``amount`` (negative: take away)."""
        self._otel.add(amount, attributes, context)
        self._shared.series(attributes).inc(amount)


class _Histogram(Histogram):
    """Records into the OpenTelemetry histogram and into its shared one."""

    def __init__(self, otel: Histogram, shared: _Family) -> None:
        self._otel, self._shared = otel, shared

    def record(self, amount: float, attributes: Attributes = None, context: Context | None = None) -> None:
        """Record one value."""
        self._otel.record(amount, attributes, context)
        self._shared.series(attributes).observe(amount)


def scrape_registry(folder: str, resource: Resource) -> CollectorRegistry:
    """The registry a scrape renders: every process's metrics in ``folder``, this one's ``target_info``."""
    registry = CollectorRegistry()
    registry.register(_Scrape(Path(folder), resource))
    return registry


class _Scrape:
    """A prometheus_client collector of the shared files, written back as the exporter writes metrics."""

    def __init__(self, folder: Path, resource: Resource) -> None:
        self._folder, self._files = folder, MultiProcessCollector(None, str(folder))
        labels = {sanitize_attribute(key): _label(value) for key, value in resource.attributes.items()}
        self._target = InfoMetricFamily("target", "Target metadata", value=labels)

    def collect(self) -> Iterator[Metric]:
        """``target_info``, then each family the files hold."""
        self._forget_the_dead()
        yield self._target
        for family in self._files.collect():
            yield _as_exported(family)

    def _forget_the_dead(self) -> None:
        """Drop the gauges of processes that are gone: a gauge adds up the live processes only."""
        for path in self._folder.glob("gauge_live*_*.db"):
            pid = int(path.stem.rpartition("_")[2])
            try:
                os.kill(pid, 0)  # signal 0: only whether the process is there
            except (ProcessLookupError, PermissionError):  # gone (or the pid is another user's now)
                mark_process_dead(pid, str(self._folder))


def _as_exported(family: Metric) -> Metric:
    """``family`` as the exporter writes it: each series with the family's every label, bounds as given."""
    keys = {key for sample in family.samples for key in sample.labels} - {"le"}
    bounds = _bounds.get(family.name, {})
    samples = []
    for sample in family.samples:
        labels = {key: sample.labels.get(key, "") for key in keys}
        if "le" in sample.labels:
            labels["le"] = bounds.get(sample.labels["le"], sample.labels["le"])
        samples.append(sample._replace(labels=labels))
    family.samples = samples
    return family
