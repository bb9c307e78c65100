"""Lists the metric names, label values of `le` and selector labels that
RabbitMQ's published Grafana dashboards query, from the PromQL `expr` (and
template variable) fields of their JSON: the test data of
tests/node/http/test_prometheus_dashboards.py.

    python scripts/dashboard-metrics.py GIT_DIR > tests/node/http/data/rabbitmq_dashboards.json

GIT_DIR: a clone of rabbitmq/rabbitmq-server (a bare one will do).
"""

import json
import re
import subprocess
import sys

DIR = "deps/rabbitmq_prometheus/docker/grafana/dashboards"
DASHBOARDS = ("RabbitMQ-Overview", "RabbitMQ-Quorum-Queues-Raft", "RabbitMQ-Stream")
# label lists of PromQL's modifiers and functions, and label matchers: not metric names
_LABEL_LISTS = re.compile(r"\b(?:group_left|group_right|on|by|without|ignoring)\s*\([^)]*\)|\{[^}]*\}")
_LABEL_VALUES = re.compile(r"label_values\(([^,()]*(?:\{[^}]*\})?)\s*,\s*\w+\)")
_NAME = re.compile(r"\b(?:rabbitmq|erlang)_[a-z_]+\b")


def queries(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("expr", "query", "definition") and isinstance(value, str):
                yield value
            else:
                yield from queries(value)
    elif isinstance(node, list):
        for item in node:
            yield from queries(item)


def names(expr: str) -> set[str]:
    expr = _LABEL_VALUES.sub(r"\1", expr)  # label_values(metric{...}, label): the metric only
    return set(_NAME.findall(_LABEL_LISTS.sub(" ", expr)))


def main(git_dir: str) -> None:
    def git(*args: str) -> str:
        return subprocess.run(["git", "--git-dir", git_dir, *args], check=True, capture_output=True, text=True).stdout

    out = {"repository": "rabbitmq/rabbitmq-server", "dashboards": {}}
    for name in DASHBOARDS:
        path = f"{DIR}/{name}.json"
        commit = git("log", "-1", "--format=%H", "HEAD", "--", path).strip()
        exprs = set(queries(json.loads(git("show", f"{commit}:{path}"))))
        out["dashboards"][name] = {
            "path": path,
            "commit": commit,
            "metrics": sorted(set().union(*map(names, exprs))),
            "le": sorted({le for e in exprs for le in re.findall(r'le="([^"]+)"', e)}),
            "selector_labels": sorted({label for e in exprs for label in re.findall(r"(\w+)\s*!?=~?\s*\"", e)}),
        }
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main(sys.argv[1])
