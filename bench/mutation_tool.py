"""Tool-made mutation testing of the training mechanisms (issue 25): cosmic-ray generates the mutants
of each chosen module's mechanism functions, applies each one alone to a temporary COPY of the package
and runs that module's fast test selection; the survivors (file, line, the mutation's diff) are
written to OUT.md and OUT.json.

    pip install -e '.[mutation]'   # cosmic-ray
    OMP_NUM_THREADS=1 nice -n 15 python bench/mutation_tool.py --modules esimcse,loop --out /tmp/mut
    python bench/mutation_tool.py --list                 # the module sets, their regions and mutant counts

Why cosmic-ray and not mutmut: mutmut 3 names a mutant by the module path it derives from the file path
(only ./, src/ or source/ layouts), so ``plugins/simcse.py`` imported as ``benchbench_plugins.simcse``
(pyproject's package-dir) never activates its mutants; and it mutates only inside functions (its
trampolines), never a module constant or a dataclass default, which are half of the protocol here
(``L2_GRID``, ``momentum: float = 0.995``). cosmic-ray edits the file itself, so any layout and any
expression can be mutated; it edits in place, hence the copy (the shared tree is never touched).

What is mutated: only the regions named in MODULES (functions, methods, classes, module constants),
with one mutant per site for binary and comparison operators (+ <-> -, * <-> /, < <-> <=, == <-> !=,
... : the off-by-one and wrong-direction mistakes) plus cosmic-ray's number +-1, True/False, and/or,
not added/removed, unary minus removed, decorator removed, loop made empty, break/continue; nothing
inside type annotations (``from __future__ import annotations``: they are never evaluated).

Speed: each mutant's tests run in a process forked from a server that has imported torch,
transformers and pytest once (as mutmut does) but no benchbench module, so the mutated file is
imported fresh; that saves ~5 s of CPU a mutant on this machine. Each test run has a time limit
(``--timeout``; a run past it counts as killed, as cosmic-ray counts it); the whole run has a budget
(``--budget``), after which the remaining mutants are reported as not run.

Survivors listed in EQUIVALENT (by file, operator and the changed line) are reported as equivalent
with the reason; the others as survived. Exit status 1 when any mutant survived.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# -m "": every named test runs, the slow ones too (pyproject's addopts deselects them by default)
PYTEST = ["-q", "-x", "-p", "no:cacheprovider", "-m", ""]
K = "tests/plugins/test_mechanism_details.py::"


@dataclass(frozen=True)
class Target:
    file: str  # relative to the repository root
    regions: tuple[str, ...]  # top-level names, or Class.method
    tests: tuple[str, ...]  # pytest arguments (node ids, files, -k)


# what each module set mutates (top-level names, or Class.method) and the fast tests it runs for it
MODULES: dict[str, Target] = {
    "esimcse": Target(
        "plugins/esimcse.py",
        (
            "MAX_REPEATS",
            "ESimCSEConfig",
            "repetition_positions",
            "repeat_at",
            "ESimCSEObjective.collate",
            "ESimCSEObjective.negatives",
            "ESimCSEObjective.enqueue",
            "ESimCSEObjective.momentum_update",
            "ESimCSEObjective.keys",
            "ESimCSEObjective.forward",
            "esimcse_loss",
        ),
        (
            "tests/plugins/test_esimcse.py",
            K + "TestESimCSE",
            "-k",
            "not cli_run and not conformance and not registered",
        ),
    ),
    "mirror_bert": Target(
        "plugins/mirror_bert.py",
        (
            "MIN_MASKED_CHARS",
            "MirrorBERTConfig",
            "mask_span",
            "nt_xent",
            "drophead_hook",
            "MirrorBERTObjective.collate",
            "MirrorBERTObjective.forward",
        ),
        (
            "tests/plugins/test_mirror_bert.py",
            K + "TestMirrorBERT",
            "-k",
            "not cli_run and not conformance and not registered",
        ),
    ),
    "promptbert": Target(
        "plugins/promptbert.py",
        (
            "DELTA_ROWS",
            "PromptBERTConfig",
            "Template.bias",
            "add_period",
            "PromptEncoder.tokenize",
            "PromptEncoder.forward",
            "PromptBERTObjective",
        ),
        ("tests/plugins/test_promptbert.py", K + "TestPromptBERT", "-k", "not conformance_kit"),
    ),
    "sncse": Target(
        "plugins/sncse.py",
        ("SNCSEConfig", "punctuate", "prompt_batch", "mask_vectors", "bml", "SNCSEObjective"),
        ("tests/plugins/test_sncse.py", K + "TestSNCSE", "-k", "not conformance_kit and not negation"),
    ),
    "diffcse": Target(
        "plugins/diffcse.py",
        (
            "MASK_SHARE",
            "RANDOM_SHARE_OF_REST",
            "DiffCSEConfig",
            "mask_for_generator",
            "make_projection",
            "load_generator",
            "DiffCSEObjective",
        ),
        (
            "tests/plugins/test_diffcse.py",
            K + "TestDiffCSE",
            "-k",
            "not cli_run and not conformance and not registered",
        ),
    ),
    "_prompt": Target(
        "plugins/_prompt.py",
        ("Template", "sentence_ids", "pad_rows", "make_mlp"),
        (
            "tests/plugins/test_promptbert.py",
            "tests/plugins/test_sncse.py",
            K + "TestPrompt",
            "-k",
            "not conformance_kit and not negation",
        ),
    ),
    "loop": Target(
        "benchbench/train/loop.py",
        ("LoopConfig", "resolve_steps", "ItemStream", "_optimizer_step", "train_loop"),
        (
            "tests/plugins/test_method_fidelity.py::test_gradient_clipping_is_on_by_default_at_norm_1",
            "tests/plugins/test_method_fidelity.py::test_collate_rng_is_fresh_per_micro_batch",
            "tests/plugins/test_method_fidelity.py::test_scheduler_steps_once_per_optimizer_step",
            "tests/train/test_training.py::test_item_stream_is_position_addressable_and_covers_each_epoch",
            "tests/train/test_training.py::test_budget_and_accounting",
            "tests/train/test_training.py::test_gradient_accumulation_equals_the_large_batch",
            # checkpoints and resume: the loop's own safety machinery. The signal tests
            # (tests/train/test_training_state_integrity.py) cannot run in the forked test server (no main-thread
            # signal handling there): their mutants are checked by hand (docs/fidelity.md)
            "tests/train/test_training.py::test_checkpoint_of_another_run_is_not_resumed",
            "tests/train/test_training.py::test_kill_and_resume_gives_the_uninterrupted_weights",
            "tests/train/test_training.py::test_checkpoints_by_wall_time_and_kept_until_the_encoder_is_complete",
            K + "TestLoop",
        ),
    ),
    "fit": Target(
        "benchbench/train/fit.py",
        ("fit",),
        ("tests/plugins/test_method_fidelity.py::test_every_method_passes_max_grad_norm_to_the_loop", K + "TestLoop"),
    ),
    "noise": Target(
        "benchbench/train/noise.py",
        ("words", "join", "WordNoise", "DEFAULT_RATIOS", "register_noise"),
        ("tests/plugins/test_tsdae.py", K + "TestNoise", "-k", "noise or swap or paper_defaults or Noise"),
    ),
    "classifier": Target(
        "benchbench/evaluate/adapters/_classifier.py",
        ("L2_GRID", "OPTIM_LR", "Setting", "SETTINGS", "validation_split_stream"),
        (
            "tests/evaluate/test_senteval.py::test_unknown_setting_is_a_config_error",
            K + "TestClassifier",
            "tests/evaluate/test_senteval.py::test_protocols_on_separable_data",
        ),
    ),
    "senteval": Target(
        "benchbench/evaluate/adapters/senteval.py",
        ("TREC_CLASSES", "SICK_CLASSES", "pair_features"),
        (
            "tests/evaluate/test_senteval.py::test_trec_mrpc_sick_sst_loaders",
            "tests/evaluate/test_senteval.py::test_pair_features_and_featurize_order",
            K + "TestClassifier",
        ),
    ),
    "simcse": Target(
        "plugins/simcse.py",
        ("SimCSEConfig", "make_mlp", "SimCSEObjective"),
        (
            "tests/plugins/test_method_fidelity.py::test_simcse_loss_equals_mnrl_scale_20_on_non_unit_vectors",
            "tests/plugins/test_method_fidelity.py::test_simcse_keeps_the_mlp_at_test_time_and_not_the_training_length",
            K + "TestSimCSE",
            "tests/plugins/test_simcse_plus_plus.py",  # the SimCSE++ ingredients' branches of SimCSEObjective
            "-k",
            "not cli_run and not conformance and not registered",
        ),
    ),
    "_contrastive": Target(
        "plugins/_contrastive.py",
        ("BN_EPS", "dropout_off", "off_dropout_infonce", "dimension_contrastive_loss", "check_ingredients"),
        ("tests/plugins/test_simcse_plus_plus.py", "-k", "not cli_run and not conformance and not registered"),
    ),
    "simcse_plus_plus": Target(
        "plugins/simcse_plus_plus.py",
        ("SimCSEPlusPlusConfig",),
        ("tests/plugins/test_simcse_plus_plus.py", "-k", "defaults or result_key or bad_options or builds"),
    ),
    "whitenedcse": Target(
        "plugins/whitenedcse.py",
        (
            "WHITEN_ROWS",
            "WhitenedCSEConfig",
            "whiten_groups",
            "shuffled_group_whitening",
            "WhitenedCSEObjective",
            "whitenedcse_loss",
            "WhitenedCSE._check",
        ),
        ("tests/plugins/test_whitenedcse.py", "-k", "not cli_run and not conformance and not registered"),
    ),
    "infocse": Target(
        "plugins/infocse.py",
        (
            "InfoCSEConfig",
            "bert_init",
            "frozen_lower_layers",
            "head_layers",
            "lm_head_of",
            "random_lm_head",
            "InfoCSEObjective",
            "InfoCSE",
        ),
        (
            "tests/plugins/test_infocse.py",
            "-k",
            "not cli_run and not conformance and not registered and not reference_codes",
        ),
    ),
    "rankcse": Target(
        "plugins/rankcse.py",
        (
            "EPS",
            "RankCSEConfig",
            "listnet",
            "listmle",
            "consistency_loss",
            "RankCSEObjective",
            "parse_teacher_set",
            "RankCSE",
        ),
        (
            "tests/plugins/test_rankcse.py",
            "-k",
            "not cli_run and not conformance and not registered and not reference_codes",
        ),
    ),
    "denosent": Target(
        "plugins/denosent.py",
        (
            "NO_NOISE",
            "DenoSentConfig",
            "DenoSentEncoder",
            "build_decoder",
            "mlm_head",
            "DenoSentObjective",
            "contrastive_loss",
            "constant_with_warmup",
            "DenoSent._check",
            "DenoSent.loss_chance",
            "DenoSent._noise",
        ),
        ("tests/plugins/test_denosent.py", "-k", "not cli_run and not conformance and not registered"),
    ),
    "views": Target(
        "benchbench/train/views.py",
        ("ViewCache.config_key", "ViewCache.get", "ViewCache.put", "ViewCache.map"),
        ("tests/plugins/test_augmenters.py", K + "TestViews", "-k", "cache or TestViews"),
    ),
    "augmenters": Target(
        "plugins/augmenters.py",
        ("_tokens", "_detok", "_text_seed", "CachedAugmenter"),
        (
            "tests/plugins/test_augmenters.py",
            K + "TestAugmenters",
            "-k",
            "synonym or cache or mlm_substitutes or TestAugmenters",
        ),
    ),
    "tsdae": Target(
        "plugins/tsdae.py",
        ("TSDAEConfig", "OneVectorCrossAttention", "TSDAEObjective.collate", "TSDAEObjective.forward"),
        (
            "tests/plugins/test_method_fidelity.py::test_tsdae_noise_corrupts_the_input_and_leaves_the_target_clean",
            "tests/plugins/test_method_fidelity.py::test_tsdae_loss_equals_denoising_auto_encoder_loss",
            "tests/plugins/test_method_fidelity.py::test_one_vector_shortcut_keeps_attention_dropout_in_training",
            "tests/plugins/test_tsdae.py",
            K + "TestTSDAE",
            "-k",
            "not train_saves",
        ),
    ),
    "ct": Target(
        "plugins/ct.py",
        ("CTConfig", "segmented_lr", "CTObjective"),
        (
            "tests/plugins/test_method_fidelity.py::test_ct_loss_equals_contrastive_tension_loss",
            "tests/plugins/test_method_fidelity.py::test_ct_uses_the_segmented_schedule",
            "tests/plugins/test_method_fidelity.py::test_ct_random_negative_equal_to_anchor_is_labelled_0_and_dropout_option",
            K + "TestCT",
        ),
    ),
    "bsl": Target(
        "plugins/bsl.py",
        ("BSLConfig", "predictor", "BSLObjective", "symmetric_negative_cosine", "make_optimizer", "schedule"),
        ("tests/plugins/test_bsl.py", K + "TestBSL", "-k", "not registered"),
    ),
    "trans_encoder": Target(
        "plugins/trans_encoder.py",
        ("bi_to_cross_loss", "cross_to_bi_loss", "TransEncoderConfig", "MutualConfig"),
        (
            "tests/plugins/test_trans_encoder.py::test_losses_are_soft_bce_and_mse_on_cosine",
            "tests/plugins/test_trans_encoder.py::test_default_cross_rule_constants",
            "tests/plugins/test_trans_encoder.py::test_cycle_targets_and_refreshing",
            "tests/plugins/test_trans_encoder.py::test_mutual_labels_are_the_mean_over_models",
            K + "TestTransEncoder",
        ),
    ),
    # issue 48: decoder LLM starts and the LLM-era readouts (PromptEOL, echo, token prepending, LLM2Vec,
    # plm-last). Not mutated: dequantise_gguf (only the slow real-GGUF test runs it) and the plugins'
    # registration hooks (every test of the module fails without them).
    "decoder": Target(
        "benchbench/encode/decoder.py",
        (
            "DECODER_POOLINGS",
            "DECODER_MODEL_TYPES",
            "ATTENTIONS",
            "BIDIRECTIONAL_ARCHS",
            "is_decoder_name",
            "resolve_decoder",
            "file_sha256",
            "gguf_folder",
            "_convert_gguf",
            "verify_manifest",
            "load_decoder",
            "_tokenizer",
            "set_pad_token",
            "make_bidirectional",
            "is_bidirectional",
            "tiny_tokenizer",
            "_tiny_parts",
            "tiny_decoder",
            "DecoderEncoder",
            "last_token_index",
        ),
        (
            "tests/encode/test_decoder.py",
            "tests/encode/test_decoder_mutation_gaps.py",
            "tests/plugins/test_llm_readouts.py",
            "tests/plugins/test_llm_readouts_mutation_gaps.py",
            "-k",
            "not real_smollm2 and not cli_run",
        ),
    ),
    "_readout": Target(
        "plugins/_readout.py",
        ("ReadoutEncoder", "as_readout"),
        ("tests/plugins/test_llm_readouts.py", "tests/plugins/test_llm_readouts_mutation_gaps.py", "-k", "not cli_run"),
    ),
    "prompteol": Target(
        "plugins/prompteol.py",
        ("TEMPLATE", "PromptEOLConfig", "prompteol_sentence", "PromptEOLEncoder", "PromptEOL"),
        ("tests/plugins/test_llm_readouts.py", "tests/plugins/test_llm_readouts_mutation_gaps.py", "-k", "not cli_run"),
    ),
    "echo": Target(
        "plugins/echo.py",
        ("TEMPLATE", "PROMPT", "_BRACES", "EchoConfig", "parse_template", "EchoEncoder", "Echo"),
        ("tests/plugins/test_llm_readouts.py", "tests/plugins/test_llm_readouts_mutation_gaps.py", "-k", "not cli_run"),
    ),
    "token_prepending": Target(
        "plugins/token_prepending.py",
        ("TEMPLATE", "PST", "TokenPrependingConfig", "decoder_layers", "TokenPrependingEncoder", "TokenPrepending"),
        ("tests/plugins/test_llm_readouts.py", "tests/plugins/test_llm_readouts_mutation_gaps.py", "-k", "not cli_run"),
    ),
    "llm2vec": Target(
        "plugins/llm2vec.py",
        (
            "STAGES",
            "ENCODE_MAX_LENGTH",
            "LORA_MODULES",
            "TRAIN_POOLS",
            "WEIGHTS_DTYPES",
            "LLM2VecConfig",
            "mntp_tokenizer",
            "mntp_loss",
            "MNTPObjective",
            "text_mask",
            "mean_pool",
            "simcse_loss",
            "encode_tokenizer",
            "SimCSEStageObjective",
            "TiedHead",
            "DecoderLM",
            "load_lm",
            "add_lora",
            "merge_lora",
            "set_attention_dropout",
            "LLM2VecEncoder",
            "load_llm2vec_encoder",
            "LLM2Vec",
            "_stage_accounting",
        ),
        ("tests/plugins/test_llm2vec.py", "tests/plugins/test_llm2vec_mutation_gaps.py"),
    ),
    "plm_last": Target(
        "plugins/baselines.py",
        ("PLMLast",),
        ("tests/plugins/test_plm_last.py", "tests/run/test_conformance.py", "-k", "plm-last or plm_last"),
    ),
}

# Survivors judged equivalent, by "file | operator | original line -> mutated line" (KEY below): the
# code behaves the same for every input it can get; the reason says why.
EQUIVALENT: dict[str, str] = {
    "plugins/mirror_bert.py | ReplaceUnaryOperator_Delete_USub | z = F.normalize(torch.cat([z1, z2]).float(), dim=-1)"
    " -> z = F.normalize(torch.cat([z1, z2]).float(), dim=1)": "z is 2-D (2N x d): dim 1 is dim -1",
    **{
        "plugins/promptbert.py | NumberReplacer | def bias(self, model: torch.nn.Module, n: torch.Tensor, rows: int = 0)"
        f" -> torch.Tensor: -> def bias(self, model: torch.nn.Module, n: torch.Tensor, rows: int = {r}) -> torch.Tensor:": (
            "the default is used only at encoding, where k = max(rows, max(n) + 1) and max(n) + 1 >= 1 > rows"
        )
        for r in (1, -1)
    },
}
_WORDS = "out.append((m.group(), m.start() > last or (m.start() > 0 and text[m.start() - 1].isspace())))"
_DEAD = (
    "in words(), a token starting where the last one ended follows a non-space character, and a gap "
    "before a token is whitespace (every other character is a token): the clause after 'or' is never "
    "what decides"
)
EQUIVALENT |= {
    f"benchbench/train/noise.py | {op} | {_WORDS} -> {_WORDS.replace(a, b)}": _DEAD
    for op, a, b in (
        ("ReplaceOrWithAnd", "last or (", "last and ("),
        ("NumberReplacer", "m.start() > 0 and", "m.start() > 1 and"),
        ("NumberReplacer", "m.start() - 1]", "m.start() - 0]"),
    )
}
EQUIVALENT["benchbench/train/noise.py | NumberReplacer | last = 0 -> last = 1"] = (
    "only the first token reads it: one at position 1 follows a whitespace character (the only "
    "characters no token takes), so it is 'preceded by space' either way"
)
_PARSE = 'if text.count("[X]") != 1 or text.count("[MASK]") != 1 or text.index("[MASK]") < text.index("[X]"):'
EQUIVALENT[
    f"plugins/_prompt.py | ReplaceComparisonOperator_Lt_LtE | {_PARSE} -> {_PARSE.replace(') < t', ') <= t')}"
] = '"[MASK]" and "[X]" never start at the same index'

EQUIVALENT |= {
    "plugins/esimcse.py | RemoveDecorator |  / @torch.no_grad() -> ": (
        "enqueue, momentum_update and keys (the key cannot tell which): the keys are detached before "
        "they are queued, the queue is a buffer and the momentum encoder's parameters have "
        "requires_grad False (pinned by test_momentum_encoder_moves_only_by_ema_with_m_not_1_minus_m): "
        "the same numbers, only a graph built and dropped"
    ),
}

# the same, by pattern (a mutant key matching the regular expression)
EQUIVALENT_RULES: list[tuple[str, str]] = [
    (
        r"\| NumberReplacer \| +checkpoint_every: int = (field\(default=)?1000",
        "a speed knob: when a checkpoint is written, never what is trained (not in the result key; "
        "tests/train/test_training.py::test_speed_knobs_do_not_change_the_run_fingerprint)",
    ),
    (
        r"loop.py \| NumberReplacer \| checkpoint_minutes: float = 10.0 ",
        "a speed knob, like checkpoint_every: the wall-clock interval between checkpoints (not in the result key)",
    ),
    (r"loop.py \| NumberReplacer \| self._epoch, self._perm = -1,", "a sentinel that no epoch (>= 0) equals"),
    (
        r"loop.py \| NumberReplacer \| seed = int\(getattr\(ctx, \"seed\", 0\)\)",
        "every TrainContext has a seed: the default is never read",
    ),
    (r"loop.py \| NumberReplacer \| bar.update\(1\)", "the progress bar's display only"),
    (
        r"loop.py \| ReplaceTrueWithFalse \| stop.honoured = True -> stop.honoured = False",
        "set just before TrainingInterrupted is raised, and _StopRequest.__exit__ reads it only when no "
        "exception left the block: a dead store on that path",
    ),
    (
        r"tsdae.py \| ReplaceComparisonOperator_NotEq_Eq \| for g in length_groups\(\(target_ids != self.pad_id\).sum\(1\)\)",
        "grouping by pad count instead of token count: pads = width - tokens, so the same groups, each still "
        "trimmed to its own longest target (the next line): the same loss",
    ),
    (
        r"sncse.py \| ReplaceUnaryOperator_Delete_USub \| F.cosine_similarity\(z1, z2, dim=-1\), F.cosine_similarity\(z1, z3",
        "z1, z2 and z3 are (batch x dim): dim 1 is dim -1",
    ),
    (
        r"noise.py \| ReplaceComparisonOperator_(Gt_GtE|Lt_LtE) \| (keep = rng.random\(n\) > |hit = rng.random\(n\) < )",
        "a uniform draw equal to the ratio has probability 2^-53: the same words are chosen",
    ),
    (
        r"noise.py \| NumberReplacer \| k = min\(n, max\(2, int\(round\(self.ratio \* n\)\)\)\) if self.ratio > 0 else 0",
        "ratio 0: any k below 2 returns the text unchanged, with no draw",
    ),
    (
        r"noise.py \| NumberReplacer \| if k < 2: -> if k < 1:",
        "k = 1 only for a one-word text: the word swaps with itself, and numpy draws nothing to shuffle one "
        "element (tests/plugins/test_mechanism_details.py::TestNoise checks the next sentence's noise is unchanged)",
    ),
    (
        r"(bsl|trans_encoder).py \| ReplaceUnaryOperator_Delete_USub \| .*F.cosine_similarity\(.*dim=-1\)",
        "both vectors are (batch x dim): dim 1 is dim -1",
    ),
    (
        r"bsl.py \| NumberReplacer \| return s / max\(1, warm\) -> return s / max\( ?[02], warm\)",
        "the branch runs only for s < warm: with warm = 1 only s = 0 (0 either way), with warm = 0 never",
    ),
    (
        r"bsl.py \| NumberReplacer \| return max\(0.0, \(steps - s\).* -> return max\( -1.0,",
        "LambdaLR never asks past s = steps, where (steps - s) is 0: the clamp at 0 never acts",
    ),
    (
        r"trans_encoder.py \| NumberReplacer \| score_batch_size: int = 128",
        "pairs scored per forward at dev selection: speed only, the same scores",
    ),
    (
        r"ct.py \| ReplaceUnaryOperator_Delete_USub \| logits = \(a.float\(\) \* b.float\(\)\).sum\(-1\)",
        "a and b are (pairs x dim): dim 1 is dim -1",
    ),
    (
        r"ct.py \| ReplaceBinaryOperator_FloorDiv_Div \| .* if s / segment < len\(factors\)",
        "for an integer step s, s / segment < 4 holds exactly when s // segment < 4",
    ),
    (
        r"tsdae.py \| NumberReplacer \| p = core.dropout.p if self.training else 0.0 -> .* else -1.0",
        "any p <= 0 at evaluation takes the no-dropout branch",
    ),
    (
        r"tsdae.py \| \w+ \| if p > 0: -> if p (>= 0|> -1):",
        "at p = 0 the dropout branch keeps every head (rand >= 0) and divides by 1: the same attention; the "
        "branch is reached only at evaluation (p = 0), where the decoder is never run (it is training-only)",
    ),
    (
        r"tsdae.py \| ReplaceComparisonOperator_GtE_Gt \| keep = \(torch.rand\(b, t, h, device=v.device\) >= p\)",
        "a uniform draw equal to p has probability 2^-24 (float32): >= and > keep the same heads",
    ),
    (
        r"diffcse.py \| ReplaceComparisonOperator_Lt_LtE \| \w+ = torch.from_numpy\(rng.random\(shape\) < ",
        "a uniform draw in [0, 1) equal to the threshold has probability 2^-53: < and <= choose the same tokens",
    ),
    (
        r"diffcse.py \| RemoveDecorator \|  / @torch.no_grad\(\) -> $",
        "edit: its outputs are integer token ids (argmax, comparisons), through which no gradient flows, and "
        "the generator's parameters have requires_grad False: only a graph built and dropped",
    ),
    (
        r"augmenters.py \| NumberReplacer \| h = int.from_bytes\(hashlib.sha256\(",
        "any 7 or 9 bytes of the text's sha256 seed its views as well as 8: the contract is one fixed view "
        "per (seed, variant, text), whatever batch the text comes in (pinned by the cache tests)",
    ),
    (r"fit.py \| \w+ \| desc=f\"\{method.name\} \{ctx.task or ''\}\"", "the progress bar's label only"),
    (
        r"views.py \| NumberReplacer \| chunk: int = 2000,",
        "texts per transform call: every augmenter seeds its views per text (ViewCache.map's contract), "
        "so the chunking changes no view",
    ),
    (
        r"views.py \| NumberReplacer \| for i in range\(0, len\(uniq\), 500\): .* -> for i in range\(0, len\(uniq\), 499\)",
        "overlapping 500-text queries: the same rows, some fetched twice",
    ),
    (
        r"views.py \| NumberReplacer \| chunk = uniq\[i : i \+ 500\] -> chunk = uniq\[i : i \+ 501\]",
        "overlapping 500-text queries: the same rows, some fetched twice",
    ),
    (
        r"_classifier.py \| NumberReplacer \| stream_chunk: int = 8 ",
        "speed only: streams per gather/product block on CPU; the streams are independent (same numbers)",
    ),
    (
        r"_classifier.py \| NumberReplacer \| workers: int = \( / 0 ",
        "speed only: min(workers or cores, streams) <= 1 runs every stream in this process, > 1 forks; "
        "the streams are independent, so the numbers are the same",
    ),
    (
        r"esimcse.py \| NumberReplacer \| if top <= 0 or n_tokens < 3: -> if top <= 1 or n_tokens < 3:",
        "top = 1 draws k = rng.integers(1) = 0 either way: only that one rng draw is skipped",
    ),
    (
        r"esimcse.py \| NumberReplacer \| if top <= 0 or n_tokens < 3: -> if top <= 0 or n_tokens < 2:",
        "a 2-token input has no inner position: k = min(k, n - 2) = 0, nothing is repeated either way",
    ),
    (
        r"esimcse.py \| NumberReplacer \| width = int\(mask.any\(0\).nonzero\(\).max\(\)\) \+ 1 .*\+ 2 ",
        "one more column for the momentum keys: padding under attention mask 0 (or none: the slice stops "
        "at the end), the same [CLS] vectors",
    ),
    (
        r"promptbert.py \| NumberReplacer \| k = max\(rows, int\(n.max\(\)\) \+ 1 if n.numel\(\) else 1\)",
        "how many template-alone rows are computed: only rows 0..max(n) are ever indexed (by n), so more "
        "are unused, and with no sentence (n empty) none is",
    ),
    (
        r"infocse.py \| NumberReplacer \| layer_cls = type\(encoder.model.encoder.layer\[0\]\) -> .*layer\[ ?-1\]\)",
        "every layer of a model's stack is of one class: the last names the same class as the first",
    ),
    (
        r"infocse.py \| NumberReplacer \| bert_init\(layers, float\(getattr\(encoder.model.config, \"initializer_range\", 0.02\)\)\)",
        "getattr's default: the configs of the BERT-like models InfoCSE takes (an encoder.layer stack: BERT, "
        "RoBERTa, MiniLM, tiny-bert) all define initializer_range, so the default is never read",
    ),
    (
        r"rankcse.py \| NumberReplacer \| (off = ~torch.eye\(student.shape\[0\]|n = p.shape\[0\]).* -> .*shape\[ ?-?1\]",
        "the lists form a b x b matrix (each of the batch's b sentences against the b others): shape[0], "
        "shape[1] and shape[-1] are the same number",
    ),
    (
        r"rankcse.py \| ReplaceUnaryOperator_Delete_USub \| (p = F.log_softmax|q = F.softmax|_, order = true.sort|"
        r"p, q = sim.softmax)\(",
        "on the 2-D b x b list matrix, dim=-1 and dim=1 are the same axis",
    ),
    (
        r"rankcse.py \| NumberReplacer \| tail = torch.cumsum\(.* -> .*\.flip\(dims=\[ 0\]\)",
        "ListMLE's loss is the TOTAL of log(tail + 1e-7) - pred over the b x b matrix over b (.sum(1).mean()): "
        "flipping tail's rows instead of its columns permutes its entries, which leaves that total and its "
        "gradient unchanged",
    ),
    (
        r"rankcse.py \| NumberReplacer \| return \(torch.log\(tail \+ EPS\) - pred\).sum\(1\).mean\(\) -> .*\.sum\( 0\)",
        ".sum(0).mean() and .sum(1).mean() of a b x b matrix are both its total over b",
    ),
    (
        r"rankcse.py \| RemoveDecorator \|  / @torch.no_grad\(\) -> $",
        "teacher_scores: the teachers' parameters have requires_grad False (set in __init__; tested) and their "
        "inputs are token ids, so no graph is built either way: memory only",
    ),
]


EQUIVALENT_RULES += [
    (
        r"_contrastive.py \| NumberReplacer \| return F.cross_entropy\(corr, torch.arange\(corr.shape\[0\].* -> .*corr.shape\[ ?-?1\]",
        "corr = a.T @ b is d x d (both views are the same encoder's d-dimensional vectors, and "
        "SimCSEObjective passes only those): shape[0], shape[1] and shape[-1] are the same number",
    ),
    (
        r"whitenedcse.py \| ReplaceBinaryOperator_FloorDiv_Div \| if c.batch_size <= dim // c.num_groups: -> ",
        "reached only after the check above that num_groups divides dim: dim / num_groups is then the "
        "same whole number as dim // num_groups (the message's // is pinned by "
        "test_a_too_small_batch_is_refused_naming_the_dimensions_per_group)",
    ),
]

# issue 48: decoder starts and the LLM readouts
EQUIVALENT_RULES += [
    (
        r"(prompteol|echo|token_prepending).py \| NumberReplacer \| +batch_size: int = field\(default=16, "
        r"metadata=\{\"hash\": False\}\)",
        "texts per forward pass at encoding: every pooling reads the attention mask, so the same vectors "
        "(test_the_encoding_batch_size_is_a_speed_knob_outside_the_result_key; not in the result key)",
    ),
    (
        r"decoder.py \| NumberReplacer \| \"seconds\": round\(seconds, 1\),",
        "the conversion's time in the manifest, for people: only the files' sha256 are ever read back",
    ),
    (
        r"decoder.py \| NumberReplacer \| return \(attention_mask.to\(torch.long\) \* \(pos \+ 1\)\).argmax\(1\)",
        "any offset >= 0 keeps the largest value at the last real position (a row whose only real token is "
        "at 0 gives 0 either way: argmax of all zeros)",
    ),
    (
        r"decoder.py \| (ReplaceBinaryOperator_Sub_Add|NumberReplacer) \| +keep = max\(0, len\(ids\) - \(k - self.seq_length\)\)",
        "the first guess only: the search steps down until the cut fits, then up while one more token fits, "
        "so any start ends at the longest cut wherever fitting is monotone in the tokens kept (the tokenizers "
        "here): the same cut, more tokenizer calls",
    ),
    (
        r"decoder.py \| NumberReplacer \| return \(token_embeddings \* mask\[\.\.\., None\]\).sum\(1\) / "
        r"mask.sum\(1, keepdim=True\).clamp\(min=1e-9\) -> .*\.clamp\(min= ?-?\d\.\d+\)$",
        "a row's weight sum is a whole number >= 1 (every row has a real token), so a floor of 1e-9, "
        "-0.999999999 or 1.000000001 (1.0 in float32) never acts",
    ),
    (
        r"echo.py \| NumberReplacer \| return \[len\(self._row\(t.strip\(\)\)\[0\]\) for t in texts\] -> .*\[ 1\]\)",
        "_row returns the ids and one pooled flag per id: the two lists have the same length",
    ),
    (
        r"token_prepending.py \| NumberReplacer \| x = embed\(input_ids.masked_fill\(is_pst, 0\)\)",
        "the id looked up at the placeholder is never read: the next line puts pst_vector there (torch.where)",
    ),
    (
        r"token_prepending.py \| NumberReplacer \| return \(h, \*args\[1:\]\), kwargs -> return \(h, \*args\[ 2:\]\)",
        "transformers 5's LlamaModel and Qwen2Model pass a decoder layer its hidden states as the only "
        "positional argument (the rest by keyword): args[1:] and args[2:] are both empty",
    ),
    (
        r"llm2vec.py \| ReplaceUnaryOperator_Delete_USub \| .*F.normalize\(.*dim=-1\)",
        "q and d are (batch x dim): dim 1 is dim -1",
    ),
    (r"llm2vec.py \| ReplaceOrWithAnd \| +desc=f\"\{self.name\} \{stage\}", "the progress bar's label only"),
    (
        r"echo.py \| NumberReplacer \| return \[len\(self._row\(t.strip\(\)\)\[0\]\) for t in texts\] -> .*\[ -1\]\)",
        "_row returns the ids and one pooled flag per id: the two lists have the same length",
    ),
    (
        r"token_prepending.py \| NumberReplacer \| +h = args\[0\] if args else kwargs\[\"hidden_states\"\]",
        "transformers 5's Llama and Qwen2 layers get their hidden states as the one positional argument "
        "(measured: len(args) == 1): args[0] is args[-1]",
    ),
    (
        r"decoder.py \| NumberReplacer \| +arch: str, hidden: int, layers: int, heads: int, intermediate: int, \*, seed: int = 0",
        "_tiny_parts' only caller, load_decoder, always passes seed=",
    ),
    (
        r"decoder.py \| ReplaceBinaryOperator_Sub_Add \| +seconds = time.perf_counter\(\) - t0",
        "the conversion's time, for the manifest's 'seconds' and a log line: never read back",
    ),
    (r"decoder.py \| NumberReplacer \| +while chunk := f.read\(1 << 22\):", "the read size never changes a sha256"),
    (
        r"decoder.py \| (NumberReplacer \| +while keep > 0 and not fits\(keep\): -> +while keep > 1 |ReplaceAndWithOr \| "
        r"+while keep > 0 and not fits\(keep\):|NumberReplacer \| +keep -= 1 -> +keep -= 2)",
        "the step-up loop after it ends at the longest cut that fits from any lower start; a floor of 1 differs "
        "only when the first guess is >= 2 and no cut fits (the text's tokens growing by more than the overshoot "
        "at the seam: not seen on these tokenizers; a guess of 0 with nothing fitting is tested)",
    ),
    (
        r"llm2vec.py \| NumberReplacer \| +return F.linear\(hidden, self._embedding\[0\].weight\)",
        "_embedding is always a one-element list ([embedding]): index 0 and -1 are the same object",
    ),
    (
        r"llm2vec.py \| ReplaceFalseWithTrue \| +if not getattr\(model.config, \"tie_word_embeddings\", False\):",
        "load_lm accepts Llama and Qwen2 only (make_bidirectional), whose configs always set tie_word_embeddings "
        "(transformers 5.25): the default is never reached",
    ),
    (
        r"llm2vec.py \| ReplaceTrueWithFalse \| +n = len\(tokenizer\(t, truncation=True, max_length=max_length, "
        r"add_special_tokens=False\)",
        "a row is at most max_length wide (SimCSE collate) and the encoder's texts are already cut by _fit: an "
        "untruncated n >= the width marks the same whole row",
    ),
    (
        r"decoder.py \| NumberReplacer \| +batch_size: int = 16,",
        "texts per forward pass: every pooling reads the mask (not in the readout or the fingerprint)",
    ),
    (
        r"decoder.py \| NumberReplacer \| +kv = max\(1, heads // 2\)",
        "differs only at heads = 0, where the config's hidden // heads raises either way",
    ),
    (
        r"decoder.py \| NumberReplacer \| +\(out / MANIFEST\).write_text\(json.dumps\(manifest, indent=2\)\)",
        "the manifest is read back with json.loads: indentation is never read",
    ),
    (
        r"decoder.py \| NumberReplacer \| +folder = cache_root\(\) / \"models\" / f\"gguf-\{gguf.stem.lower\(\)\}-\{sha\[:12\]\}\"",
        "only the cache folder's name: any prefix keeps one folder per file, converted once",
    ),
    (
        r"decoder.py \| NumberReplacer \| +model, tok = _tiny_parts\(m.group\(1\), .* if m.group\(2\) else TINY_DIMS",
        "groups 2-5 of TINY_DECODER share one optional group: all set or all None",
    ),
    (
        r"decoder.py \| (ZeroIterationForLoop \| +for module in model.modules\(\):|AddNot \| +if hasattr\(module, "
        r"\"is_causal\"\):|ReplaceFalseWithTrue \| +module.is_causal = False)",
        "under transformers 5.25 the config's is_causal alone decides (eager and SDPA, with and without a mask; "
        "measured): the modules' flag, which 4.x's SDPA path read, is a defence",
    ),
]


def equivalent(key: str) -> str | None:
    import re

    return EQUIVALENT.get(key) or next((why for pat, why in EQUIVALENT_RULES if re.search(pat, key)), None)


# One mutant per site for binary and comparison operators: the mistake one actually makes.
BINOP_TO = {
    "Add": "Sub",
    "Sub": "Add",
    "Mul": "Div",
    "Div": "Mul",
    "FloorDiv": "Div",
    "Mod": "FloorDiv",
    "Pow": "Mul",
    "BitAnd": "BitOr",
    "BitOr": "BitAnd",
    "BitXor": "BitOr",
    "LShift": "RShift",
    "RShift": "LShift",
}
CMP_TO = {
    "Lt": "LtE",
    "LtE": "Lt",
    "Gt": "GtE",
    "GtE": "Gt",
    "Eq": "NotEq",
    "NotEq": "Eq",
    "Is": "IsNot",
    "IsNot": "Is",
}
OTHER_OPERATORS = {
    "core/NumberReplacer",
    "core/ReplaceTrueWithFalse",
    "core/ReplaceFalseWithTrue",
    "core/ReplaceAndWithOr",
    "core/ReplaceOrWithAnd",
    "core/AddNot",
    "core/ReplaceUnaryOperator_Delete_Not",
    "core/ReplaceUnaryOperator_Delete_USub",
    "core/RemoveDecorator",
    "core/ZeroIterationForLoop",
    "core/ReplaceBreakWithContinue",
    "core/ReplaceContinueWithBreak",
}


def operator_kept(name: str) -> bool:
    for prefix, table in (("core/ReplaceBinaryOperator_", BINOP_TO), ("core/ReplaceComparisonOperator_", CMP_TO)):
        if name.startswith(prefix):
            src, _, dst = name[len(prefix) :].partition("_")
            return table.get(src) == dst
    return name in OTHER_OPERATORS


# ---- regions ------------------------------------------------------------------------------------
def regions(path: Path, names: tuple[str, ...]) -> tuple[list[tuple[int, int]], list[tuple[tuple, tuple]]]:
    """The line ranges of ``names`` in ``path`` (decorators included) and the (start, end) positions
    of every type annotation in the file (never mutated)."""
    tree = ast.parse(path.read_text())
    found: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            found[node.name] = node
            if isinstance(node, ast.ClassDef):
                for sub in node.body:
                    if isinstance(sub, ast.FunctionDef):
                        found[f"{node.name}.{sub.name}"] = sub
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(t, ast.Name):
                    found[t.id] = node
    missing = [n for n in names if n not in found]
    if missing:
        raise LookupError(f"{path}: region(s) {missing} not found: update MODULES in bench/mutation_tool.py")
    spans = []
    for n in names:
        node = found[n]
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        spans.append((first, node.end_lineno))
    notes = []
    for node in ast.walk(tree):
        anns = [getattr(node, "annotation", None)] if isinstance(node, ast.AnnAssign | ast.arg) else []
        if isinstance(node, ast.FunctionDef):
            anns.append(node.returns)
        anns = [a for a in anns if a is not None]
        # ast columns are 0-based like parso's; lines are 1-based in both
        notes += [((a.lineno, a.col_offset), (a.end_lineno, a.end_col_offset)) for a in anns]
    return spans, notes


def in_scope(mutation, spans, notes, lines: list[str]) -> bool:
    if not operator_kept(mutation.operator_name):
        return False
    (line, col), end = tuple(mutation.start_pos), tuple(mutation.end_pos)
    if not any(a <= line <= b for a, b in spans):
        return False
    rest = lines[line - 1][col + 1 :].lstrip()
    if mutation.operator_name.startswith("core/ReplaceBinaryOperator_Mul_") and rest[:1] in ("", ",", ")"):
        return False  # the bare * of keyword-only parameters, which cosmic-ray takes for a product
    return not any(s <= (line, col) and end <= e for s, e in notes)


# ---- the fork server ------------------------------------------------------------------------------
PRELOAD = (
    "torch",
    "numpy",
    "scipy.stats",
    "sklearn.model_selection",
    "transformers",
    "transformers.models.bert.modeling_bert",
    "sentence_transformers",
    "accelerate",
    "pytest",
    "hypothesis",  # the pytest plugin: 2-9 s of import on this machine
    "hypothesis.strategies",
)


def serve(sock_path: str) -> None:
    """Import the heavy third-party modules once, then run each request's pytest in a fork."""
    import importlib
    import select
    import signal

    for name in PRELOAD:
        importlib.import_module(name)
    import torch

    torch.set_num_threads(1)
    own = [m for m in sys.modules if m.split(".")[0] in ("benchbench", "benchbench_plugins", "benchbench_tasks")]
    if own:
        raise SystemExit(f"the server imported {own[:3]}: a mutant would not be re-imported")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(sock_path)
    srv.listen(1)
    print("ready", flush=True)
    parent = os.getppid()
    srv.settimeout(1.0)
    while True:
        try:
            conn, _ = srv.accept()
        except TimeoutError:
            if os.getppid() != parent:  # the tool is gone (killed): so is the server
                return
            continue
        conn.settimeout(None)
        req = json.loads(_recv_line(conn))
        if req.get("stop"):
            conn.close()
            return
        out_path = Path(req["cwd"]) / "_last_output.txt"
        pid = os.fork()
        if pid == 0:  # the child: a fresh import of the (mutated) copy
            rc = 3
            try:
                try:  # Linux: the child dies with the server (prctl PR_SET_PDEATHSIG, SIGKILL)
                    import ctypes

                    ctypes.CDLL(None).prctl(1, signal.SIGKILL)
                except (OSError, AttributeError):
                    pass
                fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                os.chdir(req["cwd"])
                import pytest

                rc = int(pytest.main(req["args"]))
                bad = [
                    f"{m} from {getattr(mod, '__file__', '')}"
                    for m, mod in list(sys.modules.items())
                    if m.split(".")[0] in ("benchbench", "benchbench_plugins")
                    and not str(getattr(mod, "__file__", "") or req["cwd"]).startswith(req["cwd"])
                ]
                if bad:
                    print(f"NOT THE COPY: {bad[:3]}")
                    rc = 3
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(rc)
        deadline = time.monotonic() + float(req["timeout"]) + 5
        rc = None
        while rc is None:
            ready, _, _ = select.select([conn], [], [], 0.1)
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                rc = os.waitstatus_to_exitcode(status)
            elif (ready and conn.recv(1, socket.MSG_PEEK) == b"") or time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)  # the client was killed by cosmic-ray's timeout, or ours ran out
                os.waitpid(pid, 0)
                rc = 124
        text = out_path.read_text(errors="replace") if out_path.exists() else ""
        try:
            conn.sendall(json.dumps({"rc": rc, "output": text[-6000:]}).encode())
        except OSError:
            pass
        conn.close()


def _recv_line(conn: socket.socket) -> bytes:
    """One request: JSON on one line. The client keeps its end open, so that its end closing (the
    client killed at cosmic-ray's time limit) tells the server to kill the test run."""
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        buf += chunk
    return buf


def _recv_all(conn: socket.socket) -> bytes:
    chunks = []
    while chunk := conn.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def ask(sock_path: str, req: dict) -> dict:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(sock_path)
    conn.sendall(json.dumps(req).encode() + b"\n")
    reply = _recv_all(conn)
    conn.close()
    return json.loads(reply) if reply else {}


def client(sock_path: str, cwd: str, timeout: str, args: list[str]) -> int:
    """The test command cosmic-ray runs: one pytest run in the server; its exit status is pytest's."""
    reply = ask(sock_path, {"cwd": cwd, "timeout": float(timeout), "args": args})
    print(reply.get("output", ""))
    return int(reply.get("rc", 3))


# ---- the run --------------------------------------------------------------------------------------
def key_of(rel: str, operator: str, diff: str) -> str:
    lines = [ln for ln in diff.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
    old = " / ".join(ln[1:].strip() for ln in lines if ln[0] == "-")
    new = " / ".join(ln[1:].strip() for ln in lines if ln[0] == "+")
    return f"{rel} | {operator.removeprefix('core/')} | {old} -> {new}"


def failed_tests(output: str) -> str:
    names = [ln.split()[1] for ln in output.splitlines() if ln.startswith(("FAILED ", "ERROR "))]
    if output.strip() == "timeout":  # cosmic-ray's output for a run past the limit
        return "timeout"
    return ", ".join(n.split("::", 1)[-1] for n in names) or output.strip()[-200:]


def present(tests: tuple[str, ...], base: Path, kills_too: bool = True) -> list[str]:
    """``tests`` without the kill-test classes that tests/plugins/test_mechanism_details.py does not define (yet),
    or without any of them (``kills_too=False``: what the mechanism tests alone kill)."""
    kills = base / K.split("::")[0]
    text = kills.read_text() if kills.exists() and kills_too else ""
    return [t for t in tests if not t.startswith(K) or f"class {t[len(K) :]}:" in text]


def load_bench_copy():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bb_mutations", ROOT / "bench" / "mutations.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def start_server(dst: Path, env: dict):
    import subprocess

    sock = str(dst / "_server.sock")
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "_server", sock],
        cwd=dst,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    if proc.stdout.readline().strip() != "ready":
        proc.kill()
        raise RuntimeError("the test server did not start (see its error above)")
    return proc, sock


def mutant_key(rel: str, path: Path, mutation) -> str:
    """The mutant's KEY, from the mutated code (no test run needed)."""
    import difflib

    import cosmic_ray.plugins as crp
    from cosmic_ray.mutating import mutate_code

    code = path.read_text()
    mutated = mutate_code(code, crp.get_operator(mutation.operator_name)(), mutation.occurrence) or code
    diff = "\n".join(difflib.unified_diff(code.split("\n"), mutated.split("\n"), lineterm=""))
    return key_of(rel, mutation.operator_name, diff)


def plan(name: str, target: Target, base: Path, session: Path):
    """A fresh cosmic-ray session for one module: every mutant of the file, those out of scope
    marked skipped (as cosmic-ray's own filters do). Returns the work db and the in-scope items."""
    from cosmic_ray.commands import init
    from cosmic_ray.work_db import WorkDB
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    path = base / target.file
    spans, notes = regions(path, target.regions)
    db = WorkDB(str(session), WorkDB.Mode.create)
    import cosmic_ray.plugins as crp

    every = crp.operator_names
    kept = [n for n in every() if operator_kept(n)]
    crp.operator_names = lambda: kept  # init() walks the file once per operator: only the kept ones
    try:
        init([path], db, {})
    finally:
        crp.operator_names = every
    keep, lines = [], path.read_text().splitlines()
    for item in list(db.pending_work_items):
        m = item.mutations[0]
        if in_scope(m, spans, notes, lines):
            keep.append(item)
        else:
            db.set_result(item.job_id, WorkResult(worker_outcome=WorkerOutcome.SKIPPED))
    # round-robin over the regions (each in line order): a run cut short by its budget has sampled
    # every region rather than exhausted the first ones
    by_region: list[list] = [[] for _ in spans]
    for it in sorted(keep, key=lambda it: (tuple(it.mutations[0].start_pos), it.mutations[0].operator_name)):
        line = it.mutations[0].start_pos[0]
        by_region[next(i for i, (a, b) in enumerate(spans) if a <= line <= b)].append(it)
    order = [r[i] for i in range(max(map(len, by_region), default=0)) for r in by_region if i < len(r)]
    return db, order


def list_modules(names: list[str]) -> int:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bb-mutlist-") as tmp:
        for name in names:
            db, keep = plan(name, MODULES[name], ROOT, Path(tmp) / f"{name}.sqlite")
            db.close()
            t = MODULES[name]
            print(f"{name}: {t.file} {len(keep)} mutants in {', '.join(t.regions)}\n    tests: {' '.join(t.tests)}")
    return 0


def run(
    names: list[str],
    timeout: float | None,
    budget: float,
    out: Path,
    rerun: set[str] | None = None,
    kills_too: bool = True,
    skip: frozenset[str] = frozenset(),
    sample: int = 0,
    seed: int = 0,
) -> int:
    """Copy the package, start the test server, and run each module's in-scope mutants under its
    share of the budget; write the report after each module. Long because: the baseline check, the
    mutant loop with its retry and budget, and the result rows read best in one place."""
    import tempfile

    from cosmic_ray.mutating import mutate_and_test

    bench = load_bench_copy()
    t0 = time.monotonic()
    report = {"command": " ".join(sys.argv), "modules": {}, "survivors": [], "tested": []}
    with tempfile.TemporaryDirectory(prefix="bb-mutool-") as tmp:
        dst = Path(tmp)
        env = bench.make_copy(dst)
        proc, sock = start_server(dst, env)
        os.chdir(dst)  # cosmic-ray runs the test command in the current directory
        try:
            for n_done, name in enumerate(names):
                target = MODULES[name]
                # an equal share of what is left of the budget for each module still to run
                cap = (budget - (time.monotonic() - t0)) / (len(names) - n_done)
                db, items = plan(name, target, dst, dst / f"_{name}.sqlite")
                if rerun is not None:  # only the mutants a previous report listed as survivors
                    items = [it for it in items if mutant_key(target.file, dst / target.file, it.mutations[0]) in rerun]
                if skip:  # those an earlier run already tested
                    items = [
                        it for it in items if mutant_key(target.file, dst / target.file, it.mutations[0]) not in skip
                    ]
                if sample and len(items) > sample:  # a uniform draw without replacement, in the plan's order
                    chosen = set(random.Random(f"{seed}:{name}").sample(range(len(items)), sample))
                    items = [it for i, it in enumerate(items) if i in chosen]
                args = [*PYTEST, *present(target.tests, dst, kills_too)]
                t_base = time.monotonic()
                # the unmutated run's limit: 600 s, or --timeout when longer (a loaded machine)
                base = ask(sock, {"cwd": str(dst), "timeout": max(600.0, timeout or 0.0), "args": args})
                base_s = time.monotonic() - t_base
                if base.get("rc") != 0:
                    print(f"{name}: the unmutated copy fails its tests:\n{base.get('output', '')[-3000:]}")
                    return 2
                limit = timeout or max(60.0, 5 * base_s)
                cmd = f"{sys.executable} {Path(__file__).resolve()} _client {sock} {dst} {limit} " + " ".join(
                    "'" + a.replace("'", "'\\''") + "'" for a in args
                )
                row = {"file": target.file, "mutants": len(items), "killed": 0, "timeout": 0, "equivalent": 0}
                row |= {"survived": 0, "not_run": 0, "incompetent": 0, "baseline_s": round(base_s, 1), "limit_s": limit}
                print(f"{name}: {len(items)} mutants, tests {base_s:.1f} s unmutated, limit {limit:.0f} s", flush=True)
                for i, item in enumerate(items):
                    if time.monotonic() - t_base > cap:
                        row["not_run"] = len(items) - i
                        break
                    m = item.mutations[0]
                    res = mutate_and_test(item.mutations, cmd, limit)
                    if (res.output or "").strip() == "timeout":  # a loaded machine, or a real hang: once more, 3x
                        res = mutate_and_test(item.mutations, cmd.replace(f" {limit} ", f" {3 * limit} ", 1), 3 * limit)
                    db.set_result(item.job_id, res)
                    diff = (res.diff or "").replace(str(dst) + "/", "")
                    k = key_of(target.file, m.operator_name, diff)
                    line = m.start_pos[0]
                    if res.test_outcome is not None and res.test_outcome.value == "killed":
                        by = failed_tests(res.output or "")
                        row["timeout" if by == "timeout" else "killed"] += 1
                        status = f"killed ({by})"
                    elif res.test_outcome is not None and res.test_outcome.value == "survived":
                        eq = equivalent(k)
                        row["equivalent" if eq else "survived"] += 1
                        report["survivors"].append(
                            {
                                "module": name,
                                "file": target.file,
                                "line": line,
                                "key": k,
                                "diff": diff,
                                "equivalent": eq,
                            }
                        )
                        status = "equivalent" if eq else "SURVIVED"
                    else:
                        row["incompetent"] += 1
                        status = f"incompetent ({res.worker_outcome.value}): {(res.output or '')[-300:]}"
                    report["tested"].append({"module": name, "line": line, "key": k, "status": status[:300]})
                    print(f"  [{i + 1}/{len(items)}] {target.file}:{line} {m.operator_name}: {status}", flush=True)
                db.close()
                row["seconds"] = round(time.monotonic() - t_base, 1)
                report["modules"][name] = row
                report["seconds"] = round(time.monotonic() - t0, 1)
                write_report(report, out)  # after each module: a stopped run keeps what it finished
        finally:
            os.chdir(ROOT)
            proc.kill()  # its test run, if any, dies with it
            proc.wait(timeout=30)
    report["seconds"] = round(time.monotonic() - t0, 1)
    write_report(report, out)
    return 1 if any(r["survived"] for r in report["modules"].values()) else 0


def write_report(report: dict, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(report, indent=1))
    lines = [
        f"`{report['command']}` ({report['seconds']:.0f} s)",
        "",
        "| module | file | mutants | killed | timeout | equivalent | survived | not run | incompetent | s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in report["modules"].items():
        lines.append(
            f"| {name} | {r['file']} | {r['mutants']} | {r['killed']} | {r['timeout']} | {r['equivalent']} | "
            f"{r['survived']} | {r['not_run']} | {r['incompetent']} | {r['seconds']:.0f} |"
        )
    lines += ["", "## Survivors", ""]
    for s in report["survivors"]:
        verdict = f"equivalent: {s['equivalent']}" if s["equivalent"] else "**survived**"
        lines += [
            f"### {s['file']}:{s['line']} ({verdict})",
            "",
            f"key: `{s['key']}`",
            "",
            "```diff",
            s["diff"],
            "```",
            "",
        ]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out.with_suffix('.md')} and {out.with_suffix('.json')}")


def main(argv: list[str] | None = None) -> int:
    import signal

    argv = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # kill PID: the copy and the server go too
    if argv[:1] == ["_server"]:
        serve(argv[1])
        return 0
    if argv[:1] == ["_client"]:
        return client(argv[1], argv[2], argv[3], argv[4:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--modules", default="all", help=f"comma-separated, of: {', '.join(MODULES)} (default: all)")
    ap.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds per test run (default: 5 x unmutated, >= 60; a timed-out run is retried once at 3x)",
    )
    ap.add_argument(
        "--budget",
        type=float,
        default=5400,
        help="seconds for the whole run, shared equally by the modules (unused time passes on); "
        "each module's mutants run round-robin over its regions, those past its share are reported as not run",
    )
    ap.add_argument("--out", default="mutation_survivors", help="writes OUT.md and OUT.json")
    ap.add_argument(
        "--skip-tested", default="", help="previous OUT.json files (comma-separated): skip the mutants they tested"
    )
    ap.add_argument(
        "--rerun",
        default="",
        help="previous OUT.json files (comma-separated): run only the mutants they list as survivors",
    )
    ap.add_argument(
        "--without-kill-tests", action="store_true", help=f"leave out {K[:-2]} (what the mechanism tests alone kill)"
    )
    ap.add_argument(
        "--sample",
        type=int,
        default=0,
        help="at most this many mutants a module, drawn uniformly without replacement (random.Random(f'SEED:module'))",
    )
    ap.add_argument("--seed", type=int, default=0, help="the --sample draw's seed")
    ap.add_argument("--list", action="store_true", help="print the module sets and their mutant counts, run nothing")
    a = ap.parse_args(argv)
    names = list(MODULES) if a.modules == "all" else [n.strip() for n in a.modules.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODULES]
    if unknown:
        ap.error(f"--modules: unknown {unknown}; choose from {', '.join(MODULES)}")
    try:
        import cosmic_ray  # noqa: F401
    except ImportError:
        ap.error("cosmic-ray is not installed: pip install -e '.[mutation]' (or pip install cosmic-ray)")
    if a.list:
        return list_modules(names)
    rerun = None
    for f in filter(None, a.rerun.split(",")):
        try:
            rerun = (rerun or set()) | {sv["key"] for sv in json.loads(Path(f).read_text())["survivors"]}
        except (OSError, ValueError, KeyError) as e:
            ap.error(f"--rerun {f}: not a report this tool wrote ({e})")
    skip = set()
    for f in filter(None, a.skip_tested.split(",")):
        try:
            skip |= {t["key"] for t in json.loads(Path(f).read_text())["tested"]}
        except (OSError, ValueError, KeyError) as e:
            ap.error(f"--skip-tested {f}: not a report this tool wrote ({e})")
    return run(
        names,
        a.timeout,
        a.budget,
        Path(a.out).resolve(),
        rerun,
        not a.without_kill_tests,
        frozenset(skip),
        a.sample,
        a.seed,
    )


if __name__ == "__main__":
    sys.exit(main())
