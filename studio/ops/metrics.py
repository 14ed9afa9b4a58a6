"""`GET /metrics`: what the studio's database knows, in Prometheus's text format.

Every family is read from the database at scrape time by one custom collector
(`StudioCollector`), with a fixed number of queries whatever the row count (each
table is read once: counts and durations are aggregated in SQL, model calls, retries,
escalations and replayed steps are summed from the stored traces in one pass per
table). So any process that can reach the database (a web worker, any host) answers
the same numbers, and a restarted process loses nothing. Families are documented in
docs/serving.md ("Metrics").

Counting rules:
- A model call is an attempt in a stored trace. A resumed run's trace holds the calls
  of its replayed steps once (they were made once, by the delivery that journaled
  them), so a replayed step never counts as a model call; it counts in
  `packforge_replayed_steps_total`.
- Totals (`*_total`) are sums over the rows that exist: deleting a project or a
  deployment removes its rows, and its share of a total with them.
- A lease lost is a delivery that claimed a row and did not finish it, seen as a later
  claim: `attempts - 1` per row. A poisoned row was claimed more than its
  MAX_ATTEMPTS setting allows and closed as failed.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from datetime import timedelta
from typing import Any

from django.apps import apps
from django.db.models import Count, DurationField, ExpressionWrapper, F, Min, Q, Sum, Value
from django.db.models.functions import Coalesce
from django.utils import timezone
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from studio.deployments.settings import setting as serve_setting
from studio.evals.models import Eval, EvalCase
from studio.evals.settings import setting as eval_setting
from studio.ops.health_metrics import health_families
from studio.runs.models import TryRun
from studio.runs.settings import setting as run_setting

# Seconds. Eval cases and served runs go from well under a second (a scripted model)
# to minutes (a 7B model on a CPU, a run waiting on a person).
DURATION_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0)
NODE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
PACK_MODEL = "(pack model)"
REVIEW_ITEM = (
    "review.ReviewItem"  # studio/review, when installed  # the endpoint label of calls to a pack's own (scripted) model
)


def _served_models() -> tuple[Any, Any] | None:
    """ServedRun and ReviewItem (None without the review app), when serving is installed."""
    if not apps.is_installed("studio.deployments"):
        return None
    review = apps.get_model(REVIEW_ITEM) if apps.is_installed("studio.review") else None
    return apps.get_model("deployments", "ServedRun"), review


def _duration() -> ExpressionWrapper:
    return ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField())


def _histogram_aggregates(buckets: Iterable[float]) -> dict[str, Any]:
    """Aggregate expressions over an annotated `d` (a duration): one count per bucket,
    the count and the sum. Read back with `_histogram_from`."""
    out: dict[str, Any] = {f"le{i}": Count("pk", filter=Q(d__lte=timedelta(seconds=b))) for i, b in enumerate(buckets)}
    out["n"] = Count("pk")
    out["total"] = Sum("d")
    return out


def _histogram_from(row: dict[str, Any], buckets: tuple[float, ...]) -> tuple[list[tuple[str, float]], float]:
    pairs = [(_le(b), float(row[f"le{i}"])) for i, b in enumerate(buckets)]
    pairs.append(("+Inf", float(row["n"])))
    total = row["total"]
    seconds = total.total_seconds() if isinstance(total, timedelta) else float(total or 0) / 1e6
    return pairs, seconds


def _le(bound: float) -> str:
    return repr(float(bound))


class _Buckets:
    """A histogram summed in Python (per label set): cumulative counts and a sum."""

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.series: dict[tuple[str, ...], tuple[list[int], list[float]]] = {}

    def observe(self, labels: tuple[str, ...], value: float) -> None:
        counts, total = self.series.setdefault(labels, ([0] * (len(self.bounds) + 1), [0.0]))
        for i, bound in enumerate(self.bounds):
            if value <= bound:
                counts[i] += 1
        counts[-1] += 1
        total[0] += value

    def family(self, name: str, doc: str, labels: list[str]) -> HistogramMetricFamily:
        family = HistogramMetricFamily(name, doc, labels=labels)
        for key, (counts, total) in sorted(self.series.items()):
            pairs = [(_le(b), float(c)) for b, c in zip(self.bounds, counts[:-1], strict=True)]
            pairs.append(("+Inf", float(counts[-1])))
            family.add_metric(list(key), pairs, total[0])
        return family


class _Calls:
    """Model calls, tokens, rejections and retries summed from stored traces' attempts."""

    def __init__(self) -> None:
        self.calls: Counter[tuple[str, str]] = Counter()
        self.prompt: Counter[tuple[str, str]] = Counter()
        self.completion: Counter[tuple[str, str]] = Counter()
        self.errors: Counter[tuple[str, str, str]] = Counter()
        self.retries: Counter[tuple[str, str, str]] = Counter()
        self.replayed: Counter[str] = Counter()

    def add(self, source: str, endpoint: str, attempts: Any, steps: Any) -> None:
        for a in attempts if isinstance(attempts, list) else []:
            if not isinstance(a, dict):
                continue
            where = str(a.get("tier") or endpoint)
            self.calls[(source, where)] += 1
            self.prompt[(source, where)] += int(a.get("prompt_tokens") or 0)
            self.completion[(source, where)] += int(a.get("completion_tokens") or 0)
            if not a.get("ok") and a.get("stage") != "lookahead":  # a call made ahead and dropped is no error
                self.errors[(source, where, str(a.get("category") or "unknown"))] += 1
            if a.get("stage") in ("resample", "feedback"):
                self.retries[(source, str(a.get("node", "")), str(a.get("tier") or ""))] += 1
        for s in steps if isinstance(steps, list) else []:
            if isinstance(s, dict) and s.get("replayed"):
                self.replayed[source] += 1


class StudioCollector(Collector):
    """Reads the database on each `collect()`; see the module's docstring."""

    def collect(self) -> Iterator[Metric]:
        calls = _Calls()
        leases: list[tuple[str, int, int]] = []
        yield from self._evals(calls, leases)
        yield from self._try_runs(calls, leases)
        served = _served_models()
        if served is not None:
            yield from self._served(calls, leases, *served)
        yield from self._calls(calls)
        yield from _lease_families(leases)

    # -- evals and try-it runs --

    def _evals(self, calls: _Calls, leases: list[tuple[str, int, int]]) -> Iterator[Metric]:
        evals = GaugeMetricFamily("packforge_eval_runs", "Eval runs by status.", labels=["status"])
        for status, n in _by_status(Eval.objects.all()):
            evals.add_metric([status], n)
        yield evals

        cases = GaugeMetricFamily("packforge_eval_cases", "Eval case runs by status.", labels=["status"])
        for status, n in _by_status(EvalCase.objects.all()):
            cases.add_metric([status], n)
        yield cases

        row = (
            EvalCase.objects.filter(status__in=EvalCase.FINAL, started_at__isnull=False, finished_at__isnull=False)
            .annotate(d=_duration())
            .aggregate(**_histogram_aggregates(DURATION_BUCKETS))
        )
        pairs, seconds = _histogram_from(row, DURATION_BUCKETS)
        duration = HistogramMetricFamily(
            "packforge_eval_case_duration_seconds", "Wall time of finished eval cases (first claim to end)."
        )
        duration.add_metric([], pairs, seconds)
        yield duration

        leases.append(
            _leases("eval_case", EvalCase, [EvalCase.Status.ERROR], eval_setting("PACKFORGE_EVAL_MAX_ATTEMPTS"))
        )

        rows = EvalCase.objects.annotate(endpoint_name=Coalesce("eval__endpoint__name", Value(PACK_MODEL))).values_list(
            "endpoint_name", "trace__attempts", "trace__steps"
        )
        for endpoint, attempts, steps in rows.iterator(chunk_size=500):
            calls.add("eval", endpoint, attempts, steps)

    def _try_runs(self, calls: _Calls, leases: list[tuple[str, int, int]]) -> Iterator[Metric]:
        runs = GaugeMetricFamily("packforge_try_runs", "Try-it runs by status.", labels=["status"])
        for status, n in _by_status(TryRun.objects.all()):
            runs.add_metric([status], n)
        yield runs
        leases.append(_leases("try_run", TryRun, [TryRun.Status.FAILED], run_setting("PACKFORGE_RUN_MAX_ATTEMPTS")))
        rows = TryRun.objects.annotate(endpoint_name=Coalesce("endpoint__name", Value(PACK_MODEL))).values_list(
            "endpoint_name", "trace__attempts", "trace__steps"
        )
        for endpoint, attempts, steps in rows.iterator(chunk_size=500):
            calls.add("try", endpoint, attempts, steps)

    # -- served runs (studio/deployments) and the review queue (studio/review) --

    def _served(self, calls: _Calls, leases: list[tuple[str, int, int]], served: Any, review: Any) -> Iterator[Metric]:
        runs = GaugeMetricFamily(
            "packforge_served_runs", "Served runs by deployment and status.", labels=["deployment", "status"]
        )
        for deployment, status, n in (
            served.objects.values_list("deployment__name", "status").annotate(n=Count("pk")).order_by()
        ):
            runs.add_metric([deployment, status], n)
        yield runs

        duration = HistogramMetricFamily(
            "packforge_served_run_duration_seconds",
            "Wall time of ended served runs (first claim to end, time waiting for a person included).",
            labels=["deployment"],
        )
        rows = (
            served.objects.filter(status__in=served.FINAL, started_at__isnull=False, finished_at__isnull=False)
            .annotate(d=_duration())
            .values("deployment__name")
            .annotate(**_histogram_aggregates(DURATION_BUCKETS))
            .order_by("deployment__name")
        )
        for row in rows:
            pairs, seconds = _histogram_from(row, DURATION_BUCKETS)
            duration.add_metric([row["deployment__name"]], pairs, seconds)
        yield duration

        now = timezone.now()
        depth = GaugeMetricFamily(
            "packforge_run_queue_depth", "Served runs queued for a worker.", labels=["deployment"]
        )
        oldest = GaugeMetricFamily(
            "packforge_run_queue_oldest_age_seconds",
            "Age of the oldest served run queued for a worker.",
            labels=["deployment"],
        )
        for name, n, first in (
            served.objects.filter(status="queued")
            .values_list("deployment__name")
            .annotate(n=Count("pk"), first=Min("created_at"))
            .order_by()
        ):
            depth.add_metric([name], n)
            oldest.add_metric([name], max(0.0, (now - first).total_seconds()))
        yield depth
        yield oldest

        max_attempts = serve_setting("PACKFORGE_SERVE_MAX_ATTEMPTS")
        leases.append(_leases("served_run", served, ["failed"], max_attempts))

        nodes = _Buckets(NODE_BUCKETS)
        outcomes: Counter[tuple[str, str, str, str]] = Counter()
        escalations: Counter[tuple[str, str, str, str, str]] = Counter()
        rows = served.objects.values_list("deployment__name", "trace__attempts", "trace__steps")
        for deployment, attempts, steps in rows.iterator(chunk_size=500):
            calls.add("served", deployment, attempts, steps)
            _walk_steps(deployment, attempts, steps, nodes, outcomes, escalations)
        yield nodes.family(
            "packforge_node_duration_seconds",
            "Model and tool time of each node step of served runs (replayed steps: once, when they ran).",
            ["deployment", "node"],
        )
        outcome = CounterMetricFamily(
            "packforge_node_outcomes",
            "Node steps of served runs by outcome (ok, fail, unsure, wait, end) and the tier that answered.",
            labels=["deployment", "node", "tier", "outcome"],
        )
        _fill(outcome, outcomes)
        yield outcome
        escalated = CounterMetricFamily(
            "packforge_escalations",
            "Moves of a node up the tier ladder (to the next tier, or to a person), by reason (fail, unsure).",
            labels=["deployment", "node", "from_tier", "to_tier", "reason"],
        )
        _fill(escalated, escalations)
        yield escalated

        if review is not None:
            yield from _review_queue(review, now)
        yield from health_families(now)  # the deployment page's health numbers, last 24 hours

    # -- model calls, from every stored trace --

    def _calls(self, calls: _Calls) -> Iterator[Metric]:
        families = [
            ("packforge_model_calls", "Model calls (attempts in stored traces).", calls.calls),
            ("packforge_model_prompt_tokens", "Prompt tokens sent to models.", calls.prompt),
            ("packforge_model_completion_tokens", "Completion tokens models answered.", calls.completion),
        ]
        for name, doc, counter in families:
            family = CounterMetricFamily(name, doc, labels=["source", "endpoint"])
            _fill(family, counter)
            yield family
        errors = CounterMetricFamily(
            "packforge_model_errors",
            "Model answers rejected before commit, by cause (the rejection category: parse, schema, assert, ...).",
            labels=["source", "endpoint", "cause"],
        )
        _fill(errors, calls.errors)
        yield errors
        retries = CounterMetricFamily(
            "packforge_retries",
            "Re-asked model calls (resample and feedback attempts) by node and tier ('' without tiers).",
            labels=["source", "node", "tier"],
        )
        _fill(retries, calls.retries)
        yield retries
        replayed = CounterMetricFamily(
            "packforge_replayed_steps",
            "Steps replayed from a checkpoint when a run resumed (never counted as model calls).",
            labels=["source"],
        )
        for source in ("eval", "try", "served"):
            replayed.add_metric([source], calls.replayed[source])
        yield replayed


def _fill(family: Any, counts: Counter[Any]) -> None:
    for labels, n in sorted(counts.items()):
        family.add_metric(list(labels), n)


def _by_status(rows: Any) -> list[tuple[str, int]]:
    return sorted(rows.values_list("status").annotate(n=Count("pk")).order_by())


def _leases(kind: str, model: Any, failed: list[str], max_attempts: int) -> tuple[str, int, int]:
    """(kind, leases lost, rows poisoned) of one leased table, in one query."""
    row = model.objects.aggregate(
        lost=Coalesce(Sum(F("attempts") - 1, filter=Q(attempts__gt=1)), Value(0)),
        poisoned=Count("pk", filter=Q(status__in=failed, attempts__gt=max_attempts)),
    )
    return kind, int(row["lost"]), int(row["poisoned"])


def _lease_families(leases: list[tuple[str, int, int]]) -> Iterator[Metric]:
    lost = CounterMetricFamily(
        "packforge_leases_lost",
        "Deliveries that claimed a row and lost it (a later claim took over), by kind of row.",
        labels=["kind"],
    )
    poisoned = CounterMetricFamily(
        "packforge_poisoned", "Rows closed as failed after more claims than MAX_ATTEMPTS allows.", labels=["kind"]
    )
    for kind, n_lost, n_poisoned in leases:
        lost.add_metric([kind], n_lost)
        poisoned.add_metric([kind], n_poisoned)
    yield lost
    yield poisoned


def _walk_steps(
    deployment: str,
    attempts: Any,
    steps: Any,
    nodes: _Buckets,
    outcomes: Counter[tuple[str, str, str, str]],
    escalations: Counter[tuple[str, str, str, str, str]],
) -> None:
    time_of: defaultdict[tuple[str, int], float] = defaultdict(float)
    for a in attempts if isinstance(attempts, list) else []:
        if isinstance(a, dict):
            time_of[(str(a.get("node", "")), int(a.get("step") or 0))] += float(a.get("latency_s") or 0.0)
    for s in steps if isinstance(steps, list) else []:
        if not isinstance(s, dict):
            continue
        node = str(s.get("node", ""))
        if s.get("status") != "wait":
            nodes.observe((deployment, node), time_of.get((node, int(s.get("step") or 0)), 0.0))
        outcomes[(deployment, node, str(s.get("tier") or ""), str(s.get("status", "")))] += 1
        for e in s.get("escalations") or []:
            if isinstance(e, dict):
                reason = str(e.get("reason", "")).split(":", 1)[0].strip() or "unknown"
                escalations[(deployment, node, str(e.get("from", "")), str(e.get("to", "")), reason)] += 1


def _review_queue(review: Any, now: Any) -> Iterator[Metric]:
    depth = GaugeMetricFamily(
        "packforge_review_queue_depth",
        "Review items not yet decided, by deployment, node and status (open, claimed).",
        labels=["deployment", "node", "status"],
    )
    oldest = GaugeMetricFamily(
        "packforge_review_queue_oldest_age_seconds",
        "Age of the oldest undecided review item, by deployment and node.",
        labels=["deployment", "node"],
    )
    for name, node, status, n in (
        review.objects.exclude(status="decided")
        .values_list("deployment__name", "node", "status")
        .annotate(n=Count("pk"))
        .order_by()
    ):
        depth.add_metric([name, node, status], n)
    for name, node, first in (
        review.objects.exclude(status="decided")
        .values_list("deployment__name", "node")
        .annotate(first=Min("created_at"))
        .order_by()
    ):
        oldest.add_metric([name, node], max(0.0, (now - first).total_seconds()))
    yield depth
    yield oldest
