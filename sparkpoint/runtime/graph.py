"""The stream graph and the job plan: how a translated job is cut into stages.

``StreamNode`` is one operator of the job (with its uid, name, parallelism and a
factory for its runtime operator), made from one transformation by
:mod:`sparkpoint.runtime.translation`; ``StreamEdge`` connects two nodes and says how
records are partitioned between them. :func:`build_job_plan` cuts the graph into
*stages* at every edge that repartitions (``key_by``, ``window_all``, a change of
parallelism): inside a stage operators are chained and run in one task per subtask;
between stages records are exchanged. Each epoch runs every stage once.
"""

from __future__ import annotations

import copy
import hashlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from itertools import count
from typing import Any

from sparkpoint.datastream.failed_records import FAILED_RECORDS
from sparkpoint.datastream.transformations import Partitioning
from sparkpoint.errors import JobGraphError

__all__ = [
    "StreamNode",
    "StreamEdge",
    "StagePlan",
    "JobPlan",
    "build_job_plan",
    "FORWARD",
    "HASH",
    "GLOBAL",
    "REBALANCE",
    "BROADCAST",
    "CUSTOM",
]

logger = logging.getLogger(__name__)

FORWARD, HASH, GLOBAL, REBALANCE, BROADCAST, CUSTOM = (
    Partitioning.FORWARD,
    Partitioning.HASH,
    Partitioning.GLOBAL,
    Partitioning.REBALANCE,
    Partitioning.BROADCAST,
    Partitioning.CUSTOM,
)


@dataclass
class StreamEdge:
    """``source`` → ``target``; ``side_tag`` selects a side output of the source; ``type_number`` is the
    target's input (1 or 2) for a two-input operator, else 0 (Flink's ``StreamEdge.typeNumber``)."""

    id: int
    source: int
    target: int
    partitioning: Partitioning = FORWARD
    key_selector: Any = None
    side_tag: str | None = None
    type_number: int = 0
    combiner: Any = None  # combines the source's records before the exchange (windows' local aggregation)
    key_type: Any = None  # the key type key_by declared (a hash edge), if any

    @property
    def needs_watermark_bound(self) -> bool:
        """Its combiner merges only what the consumer cannot take as late: it needs a bound of the consumer's
        watermark (the deployment's, or in continuous mode ``continuous.combine_bounds``)."""
        return bool(getattr(self.combiner, "needs_watermark_bound", False))


@dataclass
class StreamNode:
    """One operator of the job as written."""

    id: int
    kind: str
    name: str
    factory: Callable[..., Any]
    uid: str | None = None
    parallelism: int | None = None
    max_parallelism: int | None = None
    inputs: list[StreamEdge] = field(default_factory=list)
    source: Any = None  # Source description for source nodes
    watermark_strategy: Any = None
    sink: Any = None  # sink description for sink nodes
    keyed: bool = False

    def effective_uid(self) -> str:
        return self.uid if self.uid is not None else self.generated_uid

    generated_uid: str = ""

    @property
    def key_type(self) -> Any:
        """The key type of this operator's keyed input: the first one a ``key_by`` into it declared (None: its
        keys are pickled, as PyFlink's undeclared keys). Every keyed input is routed by it, and its state is
        grouped by it, so that both agree on where a key lives."""
        return next((e.key_type for e in self.inputs if e.partitioning == HASH and e.key_type is not None), None)


@dataclass
class StagePlan:
    """Operators chained into one task per subtask, and the edges into and out of them."""

    id: int
    parallelism: int
    nodes: list[int]  # topological order
    input_edges: list[StreamEdge]  # from other stages
    output_edges: list[StreamEdge]  # to other stages
    internal_edges: list[StreamEdge]
    upstream_stages: list[int]
    is_source_stage: bool = False
    keyed: bool = False

    def routes_failed_records(self, node_id: int) -> bool:
        """Whether node ``node_id`` sends records its function fails on to its ``FAILED_RECORDS`` side output."""
        return any(
            e.source == node_id and e.side_tag == FAILED_RECORDS.tag_id for e in self.internal_edges + self.output_edges
        )


@dataclass
class JobPlan:
    """Everything a task needs to know about the job, shipped once to executors."""

    job_name: str
    nodes: dict[int, StreamNode]
    stages: list[StagePlan]  # topological order
    max_parallelism: int
    stage_of: dict[int, int]
    job_parameters: dict = field(default_factory=dict)
    state_backend: Any = None  # the runtime StateBackend (resolved at translation); None means hashmap
    batch: bool = False  # RuntimeExecutionMode.BATCH (or AUTOMATIC over bounded sources): no checkpoints, no late data

    # (node, subtask) -> that subtask's operator factory, for the attempt in ``_copies_of`` (see factory_for)
    _copies: dict = field(default_factory=dict, repr=False, compare=False)
    _copies_of: str = field(default="", repr=False, compare=False)

    def stage(self, stage_id: int) -> StagePlan:
        return self.stages[stage_id]

    def factory_for(self, node_id: int, subtask: int, attempt: str) -> Callable[[], Any]:
        """Node ``node_id``'s operator factory for one subtask in one attempt of the job (``attempt``): with its own
        copy of the user's function, as each of Flink's subtasks deserializes its own instance (anew after a
        failover), so that what a function keeps in its attributes is never another subtask's; kept in this
        process for the attempt's later epochs (so a process holds at most one copy per subtask it ran, as a Flink
        task manager one per slot). A source's or sink's description is not copied (a collection's elements); a
        function that cannot be copied is shared, as before. Tasks build their operators one at a time."""
        if attempt != self._copies_of:
            self._copies, self._copies_of = {}, attempt
        factory = self._copies.get((node_id, subtask))
        if factory is None:
            node = self.nodes[node_id]
            shared = {id(o): o for o in (node.source, node.sink, node.watermark_strategy) if o is not None}
            try:
                factory = copy.deepcopy(node.factory, shared)
            except Exception as e:  # noqa: BLE001 - a lock or a connection in an attribute: it stays shared
                logger.debug("the function of %r cannot be copied (%s): its subtasks share it", node.name, e)
                factory = node.factory
            self._copies[(node_id, subtask)] = factory
        return factory

    def uid(self, node_id: int) -> str:
        return self.nodes[node_id].effective_uid()

    def consumers(self, stage_id: int) -> list[int]:
        return [s.id for s in self.stages if stage_id in s.upstream_stages]

    def terminal_stages(self) -> list[int]:
        return [s.id for s in self.stages if not self.consumers(s.id)]

    def source_nodes(self) -> list[StreamNode]:
        return [n for n in self.nodes.values() if n.kind == "source"]

    def reported_max_parallelism(self, node_id: int) -> int:
        """The max parallelism an operator's functions are told (``get_max_number_of_parallel_subtasks``): 1 for a
        non-parallel source (``Source.parallel``: ``from_collection``) and what Flink would chain to it (reached
        through single-input operators of its stage), as Flink's job vertex of that chain has; else the job's."""
        stage_nodes = set(self.stage(self.stage_of[node_id]).nodes)
        node = self.nodes[node_id]
        while node.kind != "source":
            if len(node.inputs) != 1 or node.inputs[0].source not in stage_nodes:
                return self.max_parallelism
            node = self.nodes[node.inputs[0].source]
        return self.max_parallelism if getattr(node.source, "parallel", True) else 1

    def stamped_after(self, node_id: int) -> bool:
        """Whether an operator downstream of ``node_id`` assigns timestamps and watermarks of its own
        (``assign_timestamps_and_watermarks``): its subtask's watermark follows what that subtask has seen, so a
        record read after later ones in event time may be late there, whatever split it comes from."""
        seen, todo = set(), [node_id]
        while todo:
            nid = todo.pop()
            for n in self.nodes.values():
                if n.id not in seen and any(e.source == nid for e in n.inputs):
                    if n.kind == "assign_timestamps":
                        return True
                    seen.add(n.id)
                    todo.append(n.id)
        return False

    def sink_nodes(self) -> list[int]:
        """The nodes that run a sink (a :class:`~sparkpoint.connectors.base.Sink`; not print or collect)."""
        return [n.id for n in self.nodes.values() if n.kind == "sink"]

    def collect_nodes(self) -> frozenset[int]:
        """The nodes whose records go to ``execute_and_collect``'s client (committed with their epoch, as a sink's)."""
        return frozenset(n.id for n in self.nodes.values() if n.kind == "collect")


def _topological(nodes: dict[int, StreamNode]) -> list[int]:
    order: list[int] = []
    state: dict[int, int] = {}

    def visit(nid: int) -> None:
        if state.get(nid) == 2:
            return
        if state.get(nid) == 1:
            raise JobGraphError(f"the job graph has a cycle through {nodes[nid].name!r}")
        state[nid] = 1
        for e in nodes[nid].inputs:
            visit(e.source)
        state[nid] = 2
        order.append(nid)

    for nid in sorted(nodes):
        visit(nid)
    return order


def _generate_uids(nodes: dict[int, StreamNode], order: list[int]) -> None:
    """Deterministic uids for nodes without one: a hash of the node's position in the graph.

    As Flink's ``StreamGraphHasherV2``, the hash covers topology only, never names: the
    node's kind, its inputs' hashes (with the side output read), and how many nodes of the
    same kind read the same inputs before it. Renaming an operator keeps its uid, so its
    state still restores.
    """
    hashes: dict[int, str] = {}
    for position, nid in enumerate(order):
        n = nodes[nid]
        h = hashlib.sha1()
        h.update(n.kind.encode())
        for e in n.inputs:
            h.update(hashes[e.source].encode())
            h.update((e.side_tag or "").encode())
        siblings = [
            m
            for m in order[:position]
            if nodes[m].kind == n.kind and [e.source for e in nodes[m].inputs] == [e.source for e in n.inputs]
        ]
        h.update(str(len(siblings)).encode())
        hashes[nid] = h.hexdigest()[:32]
        n.generated_uid = hashes[nid]
        if (
            n.uid is None
            and n.kind not in ("sink", "print", "collect", "side_output", "union")
            and (n.kind in ("source", "assign_timestamps", "broadcast_process") or n.keyed)
        ):
            logger.warning(
                "operator %r has no uid(); using generated uid %s. Set uid() on stateful operators so "
                "savepoints keep matching when the job changes.",
                n.name,
                n.generated_uid,
            )


def _check_uids(nodes: dict[int, StreamNode], order: list[int]) -> None:
    seen: dict[str, str] = {}
    for nid in order:
        n = nodes[nid]
        if n.uid is not None:
            if n.uid in seen:
                raise JobGraphError(
                    f"uid {n.uid!r} is used by two operators ({seen[n.uid]!r} and {n.name!r}); uids must be unique"
                )
            seen[n.uid] = n.name


def _cut_stages(
    nodes: dict[int, StreamNode], order: list[int], default_parallelism: int
) -> tuple[dict[int, int], dict[int, list[int]], dict[int, int]]:
    """Stage of each node, nodes of each stage, parallelism of each stage.

    A node joins its input's stage if every input edge is a forward edge from a node of the
    same parallelism in one stage; otherwise it starts one (its forward inputs from a node of another
    parallelism rebalance; the others stay forward, subtask to subtask).
    """

    def par(n: StreamNode) -> int:
        return n.parallelism or default_parallelism

    stage_of: dict[int, int] = {}
    stage_nodes: dict[int, list[int]] = {}
    stage_par: dict[int, int] = {}
    sources = [nid for nid in order if nodes[nid].kind == "source"]
    if sources:
        stage_nodes[0] = []
        stage_par[0] = max(par(nodes[s]) for s in sources)
    next_stage = 1
    for nid in order:
        n = nodes[nid]
        if n.kind == "source":
            stage_of[nid] = 0
            stage_nodes[0].append(nid)
            continue
        in_stages = {stage_of[e.source] for e in n.inputs}
        chain = (
            len(in_stages) == 1
            and all(e.partitioning == FORWARD for e in n.inputs)
            and par(n) == stage_par[next(iter(in_stages))]
        )
        if chain:
            sid = next(iter(in_stages))
        else:
            sid = next_stage
            next_stage += 1
            stage_nodes[sid] = []
            stage_par[sid] = par(n)  # (behind global_(): all of it goes to subtask 0, as in Flink)
            for e in n.inputs:  # forward stays subtask to subtask where the parallelisms match, as in Flink
                if e.partitioning == FORWARD and par(nodes[e.source]) != stage_par[sid]:
                    e.partitioning = REBALANCE
        stage_of[nid] = sid
        stage_nodes[sid].append(nid)
    return stage_of, stage_nodes, stage_par


def _stage_plan(
    nodes: dict[int, StreamNode],
    sid: int,
    members: list[int],
    parallelism: int,
    stage_of: dict[int, int],
    max_parallelism: int,
    has_sources: bool,
) -> StagePlan:
    """One stage: its edges classified, keyed operators checked to sit behind key_by."""
    member_set = set(members)
    inputs: list[StreamEdge] = []
    internal: list[StreamEdge] = []
    outputs: list[StreamEdge] = []
    for nid in members:
        for e in nodes[nid].inputs:
            (internal if e.source in member_set else inputs).append(e)
    for other in nodes.values():
        if other.id in member_set:
            continue
        outputs.extend(e for e in other.inputs if e.source in member_set)
    for nid in members:
        n = nodes[nid]
        if n.keyed and not any(e.partitioning in (HASH, GLOBAL) for e in n.inputs):
            raise JobGraphError(f"keyed operator {n.name!r} is not fed by key_by()")
        if n.max_parallelism is not None and n.max_parallelism != max_parallelism:
            raise JobGraphError(
                f"operator {n.name!r}: per-operator max parallelism "
                f"({n.max_parallelism}) differs from the job's ({max_parallelism})"
            )
    if parallelism > max_parallelism:
        raise JobGraphError(f"parallelism {parallelism} exceeds max parallelism {max_parallelism}")
    return StagePlan(
        id=sid,
        parallelism=parallelism,
        nodes=members,
        input_edges=inputs,
        output_edges=outputs,
        internal_edges=internal,
        upstream_stages=sorted({stage_of[e.source] for e in inputs}),
        is_source_stage=(sid == 0 and has_sources),
        keyed=any(nodes[m].keyed for m in members),
    )


def _virtual_nodes_as_edges(nodes: dict[int, StreamNode], order: list[int]) -> list[int]:
    """A repartitioning (rebalance, broadcast, global, partition_custom, ...) and a ``union`` become edges into the
    operators after them, as in Flink, not pass-through operators at a parallelism of their own (where records went
    on round-robin, a producer's records of one key split between subtasks): a consumer's edge from one goes from
    the node(s) behind it, one edge per input of a union, the nearest partitioning that is not forward deciding
    (``rebalance().key_by()`` hashes). Returns the order without them."""
    virtual = {nid for nid, n in nodes.items() if n.kind in ("partition", "union")}
    ids = count(max((e.id for n in nodes.values() for e in n.inputs), default=0) + 1)
    for n in nodes.values():
        if n.id not in virtual:
            n.inputs = [resolved for e in n.inputs for resolved in _through(nodes, virtual, n, e, ids)]
    for nid in virtual:
        del nodes[nid]
    return [nid for nid in order if nid not in virtual]


def _through(
    nodes: dict[int, StreamNode], virtual: set[int], consumer: StreamNode, e: StreamEdge, ids: Iterator[int]
) -> list[StreamEdge]:
    """Edge ``e`` into ``consumer`` as edges from the real nodes behind it (``e`` itself if it has one)."""
    if e.source not in virtual:
        return [e]
    if e.side_tag is not None:
        raise JobGraphError(
            f"{consumer.name!r} reads a side output of a repartitioned stream ({nodes[e.source].name!r}): take "
            f"the side output from the operator that emits it, then repartition it"
        )
    behind = nodes[e.source].inputs
    edges = []
    for b in behind:
        if e.partitioning == FORWARD:
            moved = replace(
                e, partitioning=b.partitioning, key_selector=b.key_selector, key_type=b.key_type, source=b.source
            )
        else:
            moved = replace(e, source=b.source)
        moved.side_tag = b.side_tag
        if len(behind) > 1:
            moved.id = next(ids)
        edges.extend(_through(nodes, virtual, consumer, moved, ids))
    return edges


def build_job_plan(
    nodes: dict[int, StreamNode],
    job_name: str,
    default_parallelism: int,
    max_parallelism: int,
    job_parameters: dict | None = None,
    state_backend: Any = None,
    batch: bool = False,
) -> JobPlan:
    """Cut the stream graph into stages (uids generated where missing, and checked)."""
    if not nodes:
        raise JobGraphError("the job has no operators; add a source and a sink before execute()")
    order = _topological(nodes)
    _generate_uids(nodes, order)  # with the repartitionings as nodes, as they were: uids (and savepoints) keep
    _check_uids(nodes, order)
    order = _virtual_nodes_as_edges(nodes, order)
    # Step 1. Cut into stages.
    stage_of, stage_nodes, stage_par = _cut_stages(nodes, order, default_parallelism)
    # Step 2. Classify edges and check keyed operators sit at stage heads.
    has_sources = any(n.kind == "source" for n in nodes.values())
    stages = [
        _stage_plan(nodes, sid, stage_nodes[sid], stage_par[sid], stage_of, max_parallelism, has_sources)
        for sid in sorted(stage_nodes)
    ]
    if not has_sources:
        raise JobGraphError("the job has no source; use env.from_source(...) or env.from_collection(...)")
    return JobPlan(
        job_name=job_name,
        nodes=nodes,
        stages=stages,
        max_parallelism=max_parallelism,
        stage_of=stage_of,
        job_parameters=dict(job_parameters or {}),
        state_backend=state_backend,
        batch=batch,
    )
