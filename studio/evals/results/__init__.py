"""The numbers behind an eval's result pages, aggregated over its EvalCase rows.

Definitions are runtime/eval_report.py's (docs/eval-report.md), so the studio and
`packforge eval --json` say the same thing about the same runs:

- A case run is *scored* once it has an outcome: passed, failed, or error (a run that
  could not be brought to an outcome counts as a failure). Queued, running and
  cancelled runs are counted, but are in no rate.
- pass_rate = passed / scored, with a Wilson 95% interval; escalation_rate = tier
  "escalated" / scored; schema_violation_rate = parse + schema + truncated rejections /
  generations; mean_model_calls and cost_per_case are sums over scored runs / scored.
- A scored run without a tier (an error row) is in the `failed` tier, as the runtime
  puts every run that did not finish there.
- Per-node attempts, rejections, tokens, latency and cost come from the traces'
  attempts (runtime EvalReport.per_node); tool calls are counted beside them.
- An edge's count is the number of runs that took it at least once (EvalReport.coverage).

Everything is aggregated in the database: counts and sums with aggregate/annotate,
trace attempts and edge lists with the database's JSON array functions (json_each on
SQLite, jsonb_array_elements on Postgres). No page loads 10,000 traces into Python.
Per-node totals still make the database read every trace, so they are kept once an
eval's scored rows stop changing (in Eval.summary["node_stats"] when the backend stores
them there at the end of an eval, else in Django's cache under a key that changes with
the rows).

Split by the page that reads each part: common.py (below all the others), summary.py,
nodes.py (blame, coverage), calibration.py (tiers), cost.py, compare.py (compare, history), gate.py (the
baseline). Callers import from the module that holds the name; this package re-exports
nothing."""
