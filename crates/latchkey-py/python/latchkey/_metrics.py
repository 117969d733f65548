"""The library's metrics in this process (docs/monitoring.md lists them):
``latchkey.metrics()``, a snapshot, and ``PrometheusCollector``, which
``prometheus_client`` scrapes (it is not a dependency: the collector
imports it when made)."""

import math
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Mapping, Tuple, Union

from latchkey import _native


@dataclass(frozen=True)
class CounterSample:
    """One counter series: its labels and its count."""

    labels: Dict[str, str]
    value: int


@dataclass(frozen=True)
class HistogramSample:
    """One histogram series: its labels, how many values were recorded,
    their sum (seconds) and the cumulative count under each upper bound
    (the last one ``math.inf``)."""

    labels: Dict[str, str]
    count: int
    sum: float
    buckets: List[Tuple[float, int]]


@dataclass(frozen=True)
class Metric:
    """A metric: its name, ``"counter"`` or ``"histogram"``, its
    description and its series."""

    name: str
    type: str
    help: str
    samples: List[Union[CounterSample, HistogramSample]]


class MetricsSnapshot(Mapping[str, Metric]):
    """The metrics recorded so far, by name
    (``"latchkey_acquisitions_total"``, ...)."""

    def __init__(self, metrics: Dict[str, Metric]) -> None:
        self._metrics = metrics

    def __getitem__(self, name: str) -> Metric:
        return self._metrics[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._metrics)

    def __len__(self) -> int:
        return len(self._metrics)

    def value(self, name: str, **labels: str) -> float:
        """The sum over the series of ``name`` whose labels include
        ``labels``: a counter's count, a histogram's count of values
        (0 when none was recorded)."""
        metric = self._metrics.get(name)
        if metric is None:
            return 0
        total: float = 0
        for sample in metric.samples:
            if all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value if isinstance(sample, CounterSample) else sample.count
        return total

    def __repr__(self) -> str:
        return f"<latchkey.MetricsSnapshot {len(self)} metrics>"


def metrics() -> MetricsSnapshot:
    """A snapshot of the library's metrics in this process: counters and
    histograms, from the package's import on (a forked child starts from
    its parent's counts)."""
    shaped: Dict[str, Metric] = {}
    for name, kind, help, labels, value in _native._metrics_snapshot():
        metric = shaped.setdefault(name, Metric(name, kind, help, []))
        if kind == "counter":
            metric.samples.append(CounterSample(labels, value))
        else:
            count, total, buckets = value
            metric.samples.append(HistogramSample(labels, count, total, buckets))
    for metric in shaped.values():
        metric.samples.sort(key=lambda s: sorted(s.labels.items()))
    return MetricsSnapshot(dict(sorted(shaped.items())))


class PrometheusCollector:
    """The library's metrics for ``prometheus_client``:
    ``prometheus_client.REGISTRY.register(latchkey.PrometheusCollector())``.
    Raises ImportError when prometheus_client is not installed."""

    def __init__(self) -> None:
        import prometheus_client.core  # noqa: F401  (ImportError here, not at scrape)

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

        for metric in metrics().values():
            names = sorted({k for s in metric.samples for k in s.labels})
            family: Any
            if metric.type == "counter":
                family = CounterMetricFamily(metric.name, metric.help, labels=names)
            else:
                family = HistogramMetricFamily(metric.name, metric.help, labels=names)
            for sample in metric.samples:
                values = [sample.labels.get(k, "") for k in names]
                if isinstance(sample, CounterSample):
                    family.add_metric(values, sample.value)
                else:
                    buckets = [("+Inf" if math.isinf(le) else repr(le), n) for le, n in sample.buckets]
                    family.add_metric(values, buckets, sample.sum)
            yield family

    def describe(self) -> List[Any]:
        # Nothing up front: the series appear as the library records them.
        return []
