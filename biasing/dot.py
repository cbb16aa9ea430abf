"""Graphviz DOT rendering of small graphs, for people debugging a vocabulary."""

from __future__ import annotations

from typing import Any

from biasing.graph import BoostingGraph
from biasing.tokenizer import as_tokenizer


def _quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def to_dot(graph: BoostingGraph, tokenizer: Any = None, max_states: int = 200) -> str:
    """DOT text: states labelled "id / potential" (phrase ends double-circled), arcs "token / weight",
    back-off links dashed red with their weight. Root arcs that stay at the root are left out.

    Raises ``ValueError`` for graphs over ``max_states`` (an unreadable picture).
    """
    if graph.num_states > max_states:
        raise ValueError(f"graph has {graph.num_states} states; rendering is limited to {max_states}")
    surfaces = as_tokenizer(tokenizer).surfaces if tokenizer is not None else None
    lines = [
        "digraph boosting {",
        "  rankdir=LR;",
        "  node [shape=circle, fontsize=10]; edge [fontsize=9];",
    ]
    for state in range(graph.num_states):
        shape = "doublecircle" if graph.is_end[state] else "circle"
        label = f"{state}\n{graph.potential[state]:.2f}"
        lines.append(f"  s{state} [shape={shape}, label={_quote(label)}];")
    for arc in range(graph.num_arcs):
        source, target = int(graph.arc_from[arc]), int(graph.arc_to[arc])
        if source == 0 and target == 0:
            continue
        label_id = int(graph.arc_label[arc])
        token = surfaces[label_id] if surfaces is not None else str(label_id)
        lines.append(f"  s{source} -> s{target} [label={_quote(f'{token} / {graph.arc_weight[arc]:+.2f}')}];")
    for state in range(1, graph.num_states):
        weight = f"{graph.backoff_weight[state]:+.2f}"
        lines.append(
            f"  s{state} -> s{int(graph.backoff_to[state])} "
            f"[style=dashed, color=red, fontcolor=red, label={_quote(weight)}];"
        )
    lines.append("}")
    return "\n".join(lines) + "\n"
