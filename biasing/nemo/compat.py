"""Our graphs as NeMo 3.0.0 boosting models.

Adapts NeMo 3.0.0's ``GPUBoostingTreeModel``
(``nemo.collections.asr.parts.context_biasing.boosting_graph_batched``):
the model is constructed from its config stub and its buffers are filled from our arrays, the same fields
``NGramGPULanguageModel._init_from_suffix_tree_np`` fills. The result goes to
``GPUBiasingMultiModel.add_model`` unchanged. Only this module touches those NeMo internals.
"""

from __future__ import annotations

import numpy as np
import torch
from nemo.collections.asr.parts.context_biasing.boosting_graph_batched import (
    BoostingTreeConfig,
    GPUBoostingTreeModel,
)
from omegaconf import OmegaConf

from biasing.graph import BoostingGraph


def _tensor(array: np.ndarray, dtype: type) -> torch.Tensor:
    return torch.from_numpy(np.array(array, dtype=dtype, copy=True))


def to_nemo_model(
    graph: BoostingGraph, vocab_size: int | None = None, use_triton: bool | None = False
) -> GPUBoostingTreeModel:
    """A CPU ``GPUBoostingTreeModel`` holding ``graph`` (validated first).

    ``vocab_size`` is the decoder's non-blank vocabulary (the blank id); it must equal the graph's.
    ``use_triton=None`` lets NeMo decide (Triton kernels on CUDA when installed).
    """
    if vocab_size is not None and vocab_size != graph.vocab_size:
        raise ValueError(f"graph was built for vocab_size {graph.vocab_size}, the decoder has {vocab_size}")
    graph.validate()
    config = BoostingTreeConfig(
        num_states=graph.num_states,
        num_arcs=graph.num_arcs,
        max_order=graph.max_order,
        vocab_size=graph.vocab_size,
        separate_bos_state=False,
        use_triton=use_triton,
    )
    model = GPUBoostingTreeModel(OmegaConf.structured(config))
    num_arcs = graph.num_arcs
    with torch.no_grad():
        model.arcs_weights.data[:num_arcs].copy_(_tensor(graph.arc_weight, np.float32))
        model.from_states.data[:num_arcs].copy_(_tensor(graph.arc_from, np.int64))
        model.to_states.data[:num_arcs].copy_(_tensor(graph.arc_to, np.int64))
        model.ilabels.data[:num_arcs].copy_(_tensor(graph.arc_label, np.int64))
        model.backoff_weights.data.copy_(_tensor(graph.backoff_weight, np.float32))
        model.final_weights.data.copy_(_tensor(graph.final_weight, np.float32))
        model.backoff_to_states.data.copy_(_tensor(graph.backoff_to, np.int64))
        model.start_end_arcs.data[:, 0].copy_(_tensor(graph.state_arcs_start, np.int64))
        model.start_end_arcs.data[:, 1].copy_(_tensor(graph.state_arcs_end, np.int64))
        model.state_order.data.copy_(_tensor(graph.state_order, np.int64))
        # Our graphs' word-end rule, read by ``biasing.nemo.multi_model`` (NeMo's own code ignores buffers).
        model.register_buffer("word_end_refund", _tensor(graph.word_end_refund, np.float32))
        model.register_buffer("label_continues_word", _tensor(graph.label_continues_word, np.float32))
    model._resolve_final()
    return model
