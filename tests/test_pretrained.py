"""Our encoder carrying BERT weights against the Hugging Face model with the same weights."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModel, AutoTokenizer, BertConfig, BertModel, BertTokenizer, GPT2Config
from transformers.utils import logging as hf_logging

from minitransformer.model import Encoder
from minitransformer.pretrained import (
    EncoderRun,
    PretrainedEncoder,
    bert_weight_names,
    config_from_bert,
    default_model_path,
    load_pretrained_encoder,
    mask_from_attention_mask,
)

TOL = 1e-4
# One English and one Spanish sentence of different lengths: the batch has padding.
SENTENCES = [
    "A quiet river runs past the old mill, and the children watch the boats.",
    "Mañana iremos al mercado.",
]


@pytest.fixture(scope="module")
def minilm() -> PretrainedEncoder:
    return load_pretrained_encoder()


@pytest.fixture(scope="module")
def hf_minilm():
    """The Hugging Face model and tokenizer, loaded independently of our loader."""
    path = default_model_path()
    model = AutoModel.from_pretrained(path, attn_implementation="eager").eval()
    return model, AutoTokenizer.from_pretrained(path)


def max_diff_real(ours: torch.Tensor, theirs: torch.Tensor, real: torch.Tensor) -> float:
    """Largest |difference| over real (non-padding) positions. real: (B, T)."""
    if ours.dim() == 3:  # hidden states (B, T, D)
        keep = real[:, :, None]
    else:  # attention (B, H, T, T): real query rows and real key columns
        keep = real[:, None, :, None] & real[:, None, None, :]
    return float(((ours - theirs).abs() * keep).max())


def compare_with_hf(pre: PretrainedEncoder, model, tokenizer, texts, pair=None):
    run = pre.run(texts, pair)
    batch = tokenizer(texts, pair, padding=True, return_tensors="pt")
    assert torch.equal(run.input_ids, batch["input_ids"])
    with torch.no_grad():
        out = model(**batch, output_hidden_states=True, output_attentions=True)
    real = batch["attention_mask"].bool()
    assert torch.equal(run.real, real)
    assert len(run.hidden_states) == len(out.hidden_states) == pre.config.n_layers + 1
    assert len(run.attentions) == len(out.attentions) == pre.config.n_layers
    for layer, (ours, theirs) in enumerate(zip(run.hidden_states, out.hidden_states)):
        assert ours.shape == theirs.shape
        diff = max_diff_real(ours, theirs, real)
        assert diff <= TOL, f"hidden state {layer}: max |diff| {diff:.2e}"
    for layer, (ours, theirs) in enumerate(zip(run.attentions, out.attentions)):
        assert ours.shape == theirs.shape
        diff = max_diff_real(ours, theirs, real)
        assert diff <= TOL, f"attention of layer {layer}: max |diff| {diff:.2e}"
    return run


def test_minilm_configuration(minilm):
    cfg = minilm.config
    assert (cfg.n_layers, cfg.n_heads, cfg.d_model) == (6, 12, 384)
    assert cfg.activation == "gelu" and cfg.positional == "learned" and not cfg.norm_first
    assert cfg.embedding_norm and not cfg.scale_embeddings and cfg.n_token_types == 2
    assert cfg.layer_norm_eps == 1e-12
    assert not minilm.encoder.training
    assert minilm.reference is None


def test_minilm_matches_hugging_face_at_every_layer(minilm, hf_minilm):
    model, tokenizer = hf_minilm
    run = compare_with_hf(minilm, model, tokenizer, SENTENCES)
    assert run.lengths[1] < run.lengths[0]  # the Spanish sentence is padded
    assert run.tokens[1][-1] == tokenizer.pad_token


def test_minilm_matches_hugging_face_on_each_sentence_alone(minilm, hf_minilm):
    model, tokenizer = hf_minilm
    for text in SENTENCES:
        compare_with_hf(minilm, model, tokenizer, text)


def test_sentence_pair_uses_token_types(minilm, hf_minilm):
    model, tokenizer = hf_minilm
    run = compare_with_hf(minilm, model, tokenizer, ["Where is the cat?"], ["Under the table."])
    assert set(run.token_type_ids.unique().tolist()) == {0, 1}


def test_attention_rows_and_padding(minilm):
    run = minilm.run(SENTENCES)
    real = run.real
    for w in run.attentions:
        sums = w.sum(dim=-1)[real[:, None, :].expand(-1, w.size(1), -1)]
        torch.testing.assert_close(sums, torch.ones_like(sums))
        assert bool((w.masked_select(~real[:, None, None, :].expand_as(w)) == 0).all())


def test_padding_does_not_change_real_tokens(minilm):
    batch = minilm.run(SENTENCES).sentence(1)
    alone = minilm.run(SENTENCES[1])
    assert batch.tokens == alone.tokens
    for a, b in zip(batch.hidden_states, alone.hidden_states):
        torch.testing.assert_close(a, b, atol=TOL, rtol=0)
    for a, b in zip(batch.attentions, alone.attentions):
        torch.testing.assert_close(a, b, atol=TOL, rtol=0)


def test_queries_and_keys_give_the_attention(minilm):
    run = minilm.run("The animal was tired.", with_queries_and_keys=True)
    d_head = minilm.config.d_head
    for q, k, w in zip(run.queries, run.keys, run.attentions):
        assert q.shape == k.shape == (1, minilm.config.n_heads, w.size(-1), d_head)
        weights = torch.softmax(q @ k.transpose(-2, -1) / d_head**0.5, dim=-1)
        torch.testing.assert_close(weights, w)


def test_weight_names_cover_every_parameter(minilm):
    ours = set(minilm.encoder.state_dict())
    names = bert_weight_names(minilm.config.n_layers)
    assert set(names) == ours
    hf_names = set(
        BertModel(
            BertConfig(
                num_hidden_layers=minilm.config.n_layers,
                hidden_size=24,
                num_attention_heads=2,
                intermediate_size=32,
                vocab_size=50,
            ),
            add_pooling_layer=False,
        ).state_dict()
    )
    assert set(names.values()) <= hf_names


def test_mask_from_attention_mask():
    am = torch.tensor([[1, 1, 1], [1, 1, 0]])
    mask = mask_from_attention_mask(am)
    assert mask.dtype == torch.bool and mask.shape == (2, 1, 1, 3)
    assert mask[1, 0, 0].tolist() == [True, True, False]


def test_loading_is_silent_and_restores_logging(capfd):
    hf_logging.set_verbosity_warning()
    hf_logging.enable_progress_bar()
    load_pretrained_encoder()
    captured = capfd.readouterr()
    assert captured.out == "" and captured.err == ""
    assert hf_logging.get_verbosity() == hf_logging.WARNING
    assert hf_logging.is_progress_bar_enabled()


@pytest.fixture(scope="module")
def tiny_bert_dir(tmp_path_factory):
    """A small random BERT checkpoint (ReLU, other sizes) with its own vocabulary, on disk."""
    path = tmp_path_factory.mktemp("tiny_bert")
    words = [
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
        "the",
        "cat",
        "sat",
        "on",
        "mat",
        "a",
        "dog",
        "##s",
        "run",
        "el",
        "gato",
        ".",
        "?",
    ]
    (path / "vocab.txt").write_text("\n".join(words) + "\n", encoding="utf-8")
    BertTokenizer(str(path / "vocab.txt")).save_pretrained(path)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(words),
        hidden_size=32,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=48,
        hidden_act="relu",
        max_position_embeddings=40,
        type_vocab_size=2,
        layer_norm_eps=1e-7,
    )
    BertModel(config).save_pretrained(path)
    return path


def test_any_bert_checkpoint_by_path(tiny_bert_dir):
    pre = load_pretrained_encoder(tiny_bert_dir, keep_reference=True)
    assert isinstance(pre.encoder, Encoder)
    assert (pre.config.d_model, pre.config.n_layers, pre.config.activation) == (32, 3, "relu")
    assert pre.config.layer_norm_eps == 1e-7
    model = BertModel.from_pretrained(tiny_bert_dir, attn_implementation="eager").eval()
    tokenizer = BertTokenizer.from_pretrained(tiny_bert_dir)
    compare_with_hf(pre, model, tokenizer, ["the cat sat on the mat.", "el gato?"])
    compare_with_hf(pre, pre.reference, tokenizer, ["the dogs run"], ["a cat sat"])


def test_refuses_a_non_bert_checkpoint(tmp_path):
    GPT2Config(
        n_layer=1, n_embd=8, n_head=2, vocab_size=10, n_positions=16, bos_token_id=0, eos_token_id=0
    ).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="BERT"):
        load_pretrained_encoder(tmp_path)


@pytest.mark.parametrize(
    "option,value,message",
    [
        ("hidden_act", "gelu_new", "activation"),
        ("position_embedding_type", "relative_key", "position"),
        ("is_decoder", True, "decoder"),
    ],
)
def test_refuses_bert_options_we_do_not_have(option, value, message):
    config = BertConfig(hidden_size=32, num_attention_heads=4, intermediate_size=48, **{option: value})
    with pytest.raises(ValueError, match=message):
        config_from_bert(config)


def test_sentence_keeps_exactly_the_real_positions():
    """Works whichever side the padding is on (here on the left of sentence 1)."""
    B, H, T, D, Dh = 2, 3, 5, 4, 2
    real = torch.tensor([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]]).bool()
    hidden, attention, queries = torch.randn(B, T, D), torch.randn(B, H, T, T), torch.randn(B, H, T, Dh)
    ids = torch.arange(B * T).view(B, T)
    run = EncoderRun(
        [list("abcde"), list("PPxyz")],
        ids,
        torch.zeros_like(ids),
        real,
        (hidden,),
        (attention,),
        (queries,),
        (queries,),
    )
    one = run.sentence(1)
    assert one.tokens == [["x", "y", "z"]] and one.lengths == [3]
    assert torch.equal(one.input_ids, ids[1:, 2:])
    assert torch.equal(one.hidden_states[0], hidden[1:, 2:])
    assert torch.equal(one.attentions[0], attention[1:, :, 2:, 2:])
    assert torch.equal(one.queries[0], queries[1:, :, 2:])
    assert torch.equal(run.sentence(0).attentions[0], attention[:1])
