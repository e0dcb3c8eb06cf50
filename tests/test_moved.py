"""Old names keep working: every name a notebook has imported still imports (students keep saved copies of old
notebooks, whose setup cell installs the package as it is now), and each ``MOVED`` table finds its names where they
live now (minitransformer.moved)."""

from __future__ import annotations

import ast
import importlib
import json
import re
from pathlib import Path

import pytest

from minitransformer.moved import moved_names

ROOT = Path(__file__).resolve().parents[1]

# Every ``from minitransformer... import ...`` of the notebooks (source and both languages) when the course's props
# moved to minitransformer.course and gpt, modern and viz.heads were split: module -> names. Frozen: a saved copy
# of a notebook keeps these lines after the notebooks change theirs. Add to it, never remove.
SAVED_IMPORTS = {
    "attention_cost": "compare_backends online_attention online_softmax power_law_fit",
    "course.ablation": "FULL_SETUP LIVE_SETUP MEASURED MEASURED_SEEDS VARIANTS counting_task format_table run_ablation sign_test verdicts",
    "course.counting": "COUNTING_RECIPE corpus_loss train_counting_gpt",
    "generation": "generate",
    "hf_import": "from_gpt2 from_llama",
    "ablation": "FULL_SETUP LIVE_SETUP MEASURED MEASURED_SEEDS VARIANTS counting_task format_table run_ablation sign_test verdicts",
    "analysis": "accuracy_by_digits attention_specificity attention_to mistake_kind mistake_kinds_text mistakes_table stack_maps top_heads",
    "attention": "MultiHeadAttention causal_mask combine_masks padding_mask scaled_dot_product_attention",
    "circuits": "ablate_heads attention_patterns composition_baseline composition_scores head_outputs_mean in_context_score induction_score next_token_losses per_position_loss previous_token_score run_with_removed steepest_step uniform_pattern",
    "compression": "COMPRESSORS ByteNGram choose_order compressed_bits_per_byte model_bits_per_byte unigram_bits_per_byte CodingReport CodingSettings compress_with_model decompress_with_model narrow window_probabilities",
    "course.induction": "INDUCTION_RECIPE copy_loss periodic_batch train_induction_model",
    "course.language_model": "LANGS LONG_RECIPE PROSE_RECIPE SEPARATOR prose_data reference_curve reference_prose_run train_prose_model training_text ADAPTING_NGRAM CODING NGRAM PARTNER_SEED STATIC_CODING curve_windows reference_coding window_bits_per_byte",
    "course.prose": "HELD_OUT prose snapshot_date",
    "course.translator": "NUMBER_RECIPE default_checkpoint_path evaluate_numbers random_target_batches reference_translator train_number_translator",
    "data": "NumberTranslation ReverseDigits batch_masks pad_sequences spell_number",
    "decoding": "beam_search greedy_decode sequence_log_prob",
    "exercises": "show_solution",
    "exercises.circuits": "check_ablate_head check_induction_score check_previous_token_score",
    "exercises.compression": "check_bits_per_byte check_conditional_bits check_sample check_narrow",
    "exercises.attention": "check_attention_weights check_decoder_mask check_masked_attention check_self_attention check_softmax check_split_heads",
    "exercises.decoder": "check_cross_attention check_decoder_layer check_shift_right",
    "exercises.generation": "check_cached_attention check_top_k check_top_p",
    "exercises.heads": "check_attention_row check_strongest_head",
    "exercises.intro": "check_attention_shapes check_mha_parameters",
    "exercises.layers": "check_layer_norm check_post_ln_sublayer check_rms_norm",
    "exercises.model": "check_model_params check_output_probabilities check_scaled_embeddings",
    "exercises.modern": "check_cached_step check_online_softmax check_rope check_rope_offset check_swiglu",
    "exercises.positional": "check_interleaved_to_concat check_shift_matrix_concat check_sinusoidal_encoding",
    "exercises.tokens": "check_count_pairs check_decode_stream check_encode check_merge",
    "exercises.training": "check_noam_lr check_shift_targets check_smoothed_targets",
    "gpt": "COUNTING_RECIPE GPT GPTConfig corpus_loss from_gpt2 generate train_counting_gpt",
    "i18n": "GLOSSARY decimal decimal_commas integer yes_no",
    "kv_cache": "cache_bytes",
    "layers": "DecoderLayer EncoderLayer FeedForward",
    "model": "AttentionMaps Decoder Encoder Transformer TransformerConfig target_mask",
    "modern": "GroupedQueryAttention ModernConfig ModernTransformer RMSNorm RotaryEmbedding SwiGLU apply_rope compare_backends from_llama online_attention online_softmax permute_rope_rows power_law_fit rope_cos_sin rope_pair_order with_rope_layout",
    "positional": "LearnedPositionalEmbedding SinusoidalPositionalEncoding sinusoidal_encoding",
    "pretrained": "bert_weight_names default_model_path load_pretrained_encoder",
    "reference": "to_torch_decoder_layer to_torch_encoder_layer to_torch_mha to_torch_transformer torch_mask",
    "runtime": "seed set_seed setup",
    "sampling": "next_token_probs sample_next_token top_k_filter top_p_filter",
    "tokenizer": "BYTE_CHAR BYTE_ID ByteBPE PATTERN TIES pretokenize prose token_stats train_bpe words",
    "train": "NoamSchedule TrainedModel label_smoothed_cross_entropy load_checkpoint noam_lr save_checkpoint train validation_loss LiveCurve lm_loss",
    "translator": "NUMBER_RECIPE default_checkpoint_path evaluate_numbers random_target_batches reference_translator train_number_translator",
    "viz.attention": "plot_attention plot_heads plot_mask plot_masks plot_scaling",
    "viz.bertviz": "head_view model_view offline_scripts write_offline_page",
    "viz.circuits": "plot_head_patterns plot_loss_by_position plot_phase_change",
    "viz.compression": "plot_bits_per_byte plot_compute_curve",
    "viz.diagrams": "draw_decoder_block draw_transformer",
    "viz.generation": "plot_next_token plot_step_times plot_validity_diversity",
    "viz.heads": "head_view model_view offline_scripts plot_alignment plot_head_grid plot_head_scores plot_score_breakdown translator_attention write_offline_page",
    "viz.layers": "plot_activations plot_depth_scale plot_layer_norm",
    "viz.modern": "plot_ablation plot_attention_cost plot_rope_scores",
    "viz.positional": "plot_encoding plot_encodings plot_permuted_attention plot_rotation_matrix plot_similarities plot_similarity plot_waves",
    "viz.style": "localise",
    "viz.tokens": "plot_sequence_cost plot_tokenisations plot_tokens_per_word",
    "viz.training": "plot_accuracy_by_digits plot_losses plot_lr_schedule",
}
# The modules notebook 00's tour imported by name (importlib.import_module).
SAVED_TOUR = "attention positional layers model reference data train decoding pretrained gpt sampling kv_cache modern tokenizer viz exercises runtime i18n"

IMPORT = re.compile(r"^[ \t]*from (minitransformer[\w.]*) import (\([^)]*\)|[^\n]*)", re.M)


def notebook_code() -> dict[str, str]:
    """The code of every notebook: the sources and the executed copies in both languages."""
    code = {p.name: p.read_text(encoding="utf-8") for p in sorted((ROOT / "notebooks" / "source").glob("*.md"))}
    for path in sorted(ROOT.glob("notebooks/*/*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        code[f"{path.parent.name}/{path.name}"] = "\n".join(
            "".join(c["source"]) for c in cells if c["cell_type"] == "code"
        )
    return code


def imports_in(code: str) -> list[tuple[str, list[str]]]:
    """(module, names) of every ``from minitransformer... import`` in ``code``."""
    found = []
    for match in IMPORT.finditer(code):
        node = ast.parse(match.group(0).strip()).body[0]
        found.append((node.module, [alias.name for alias in node.names]))
    return found


def missing(module: str, names: list[str]) -> list[str]:
    imported = importlib.import_module(module)
    return [name for name in names if not hasattr(imported, name)]


@pytest.mark.parametrize("module", sorted(SAVED_IMPORTS))
def test_every_name_a_saved_notebook_imports_still_imports(module):
    assert not missing(f"minitransformer.{module}", SAVED_IMPORTS[module].split()), module


@pytest.mark.parametrize("name", SAVED_TOUR.split())
def test_the_modules_of_the_old_tour_still_import(name):
    importlib.import_module(f"minitransformer.{name}")


def test_every_name_the_notebooks_import_now_imports():
    wrong = [
        f"{where}: from {module} import {name}"
        for where, code in notebook_code().items()
        for module, names in imports_in(code)
        for name in missing(module, names)
    ]
    assert not wrong, "\n".join(wrong)


def test_the_frozen_table_holds_what_the_notebooks_import():
    """A name a notebook imports today is one a saved copy will import tomorrow: it joins the table."""
    table = {f"minitransformer.{m}": set(names.split()) for m, names in SAVED_IMPORTS.items()}
    new = sorted(
        f"{module}.{name}"
        for code in notebook_code().values()
        for module, names in imports_in(code)
        for name in names
        if name not in table.get(module, set())
    )
    assert not new, f"add to SAVED_IMPORTS in tests/test_moved.py: {new}"


def moved_tables() -> list[tuple[str, str, str]]:
    tables = []
    for path in sorted((ROOT / "src" / "minitransformer").rglob("*.py")):
        if "MOVED" in path.read_text(encoding="utf-8"):
            parts = path.relative_to(ROOT / "src").with_suffix("").parts
            module = importlib.import_module(".".join(parts))
            tables += [(module.__name__, name, home) for name, home in getattr(module, "MOVED", {}).items()]
    return tables


def test_moved_tables_exist():
    assert {old for old, _, _ in moved_tables()} == {
        "minitransformer.gpt",
        "minitransformer.modern",
        "minitransformer.tokenizer",
        "minitransformer.viz.heads",
    }


@pytest.mark.parametrize(("old", "name", "home"), moved_tables())
def test_a_moved_name_is_the_object_where_it_lives_now(old, name, home):
    module = importlib.import_module(old)
    assert name not in vars(module), f"{name} is in the MOVED table of {old} and also defined there"
    assert getattr(module, name) is getattr(importlib.import_module(f"minitransformer.{home}"), name)


def test_an_unknown_name_is_still_an_attribute_error():
    lookup = moved_names("minitransformer.gpt", {"generate": "generation"})
    assert lookup("generate").__module__ == "minitransformer.generation"
    with pytest.raises(AttributeError, match="minitransformer.gpt.*no_such_name"):
        lookup("no_such_name")
    from minitransformer import gpt

    assert not hasattr(gpt, "no_such_name")
