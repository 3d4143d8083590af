"""Mutation check for the plugins of the methods added after the first ones (ESimCSE, Mirror-BERT,
WhitenedCSE, SimCSE++ and those appended below): each listed one-line breakage of a defining
mechanism, alone, in a temporary COPY of the package (bench/mutations.py's machinery: never the shared
working tree), must make the tests named beside it fail.

    OMP_NUM_THREADS=1 nice python bench/mutations_new_methods.py [--only SUBSTRING]

Exit status 1 if any mutation survives or a target no longer matches the code exactly once.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bb_mutations", ROOT / "bench" / "mutations.py")
M = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(M)

E, MB = "tests/plugins/test_esimcse.py::", "tests/plugins/test_mirror_bert.py::"
ES, MI = "plugins/esimcse.py", "plugins/mirror_bert.py"

MUTATIONS: list[tuple[str, str, list[tuple[str, str]], list[str]]] = [
    (
        "ESimCSE EMA swapped (m <-> 1 - m)",
        ES,
        [("pm.mul_(m).add_(pe.detach(), alpha=1.0 - m)", "pm.mul_(1.0 - m).add_(pe.detach(), alpha=m)")],
        [E + "test_momentum_encoder_moves_only_by_ema_with_m_not_1_minus_m"],
    ),
    (
        "ESimCSE EMA never applied",
        ES,
        [("            self.momentum_update()\n", "            pass\n")],
        [E + "test_momentum_encoder_moves_only_by_ema_with_m_not_1_minus_m"],
    ),
    (
        "ESimCSE queue keeps the oldest instead of the newest",
        ES,
        [
            (
                "torch.cat([self.negatives(), keys.detach().to(self.queue.dtype)])[-size:]",
                "torch.cat([self.negatives(), keys.detach().to(self.queue.dtype)])[:size]",
            )
        ],
        [E + "test_queue_is_fifo_bounded_detached_and_holds_momentum_keys_of_the_originals"],
    ),
    (
        "ESimCSE keys from the online encoder",
        ES,
        [("pooled = self.momentum_encoder(input_ids=input_ids", "pooled = self.encoder(input_ids=input_ids")],
        [E + "test_queue_is_fifo_bounded_detached_and_holds_momentum_keys_of_the_originals"],
    ),
    (
        "ESimCSE keys with dropout on",
        ES,
        [("        self.momentum_encoder.eval()\n", "        self.momentum_encoder.train()\n")],
        [E + "test_queue_is_fifo_bounded_detached_and_holds_momentum_keys_of_the_originals"],
    ),
    (
        "ESimCSE keys of the repeated view",
        ES,
        [
            (
                "self.enqueue(self.keys(input_ids[:n, :width], mask[:, :width]))",
                "self.enqueue(self.keys(input_ids[n:], attention_mask[n:]))",
            )
        ],
        [E + "test_queue_is_fifo_bounded_detached_and_holds_momentum_keys_of_the_originals"],
    ),
    (
        "ESimCSE queue left out of the loss",
        ES,
        [
            (
                "esimcse_loss(z[:n], z[n:], self.negatives().clone()",
                "esimcse_loss(z[:n], z[n:], self.negatives()[:0].clone()",
            )
        ],
        [E + "test_queue_is_fifo_bounded_detached_and_holds_momentum_keys_of_the_originals"],
    ),
    (
        "ESimCSE temperature ignored (fixed 0.05)",
        ES,
        [("F.cross_entropy(logits / temperature", "F.cross_entropy(logits / 0.05")],
        [E + "test_loss_is_infonce_at_005_with_the_positive_on_the_diagonal"],
    ),
    (
        "ESimCSE positives off the diagonal",
        ES,
        [("torch.arange(len(z1), device=logits.device))", "torch.arange(len(z1), device=logits.device).roll(1, 0))")],
        [E + "test_loss_is_infonce_at_005_with_the_positive_on_the_diagonal"],
    ),
    (
        "ESimCSE repeat count upper bound included",
        ES,
        [("k = min(int(rng.integers(top)), n_tokens - 2)", "k = min(int(rng.integers(top + 1)), n_tokens - 2)")],
        [E + "test_repetition_positions_follow_the_reference_rule"],
    ),
    (
        "ESimCSE repeat count floor of 2 (the paper's max(2, .))",
        ES,
        [
            (
                "top = min(MAX_REPEATS, int(dup_rate * n_tokens))",
                "top = min(MAX_REPEATS, max(2, int(dup_rate * n_tokens)))",
            )
        ],
        [E + "test_repetition_positions_follow_the_reference_rule"],
    ),
    (
        "ESimCSE [CLS] may be repeated",
        ES,
        [("np.arange(1, n_tokens - 1)", "np.arange(0, n_tokens - 1)")],
        [E + "test_repetition_positions_follow_the_reference_rule"],
    ),
    (
        "ESimCSE repetition inserts a different token",
        ES,
        [("        if i in dup:\n            out.append(t)", "        if i in dup:\n            out.append(t + 1)")],
        [
            E + "test_repeat_at_doubles_in_place_and_keeps_order",
            E + "test_collate_views_are_originals_then_their_repetitions",
        ],
    ),
    (
        "ESimCSE momentum default 0.99",
        ES,
        [("momentum: float = 0.995", "momentum: float = 0.99")],
        [E + "test_defaults_are_the_papers"],
    ),
    (
        "Mirror-BERT masks the first view too",
        MI,
        [
            (
                "a = self.encoder.tokenize(list(items))",
                "a = self.encoder.tokenize([mask_span(s, self.span_mask, rng, self.mask_token) for s in items])",
            )
        ],
        [MB + "test_collate_first_view_is_the_sentence_second_its_masked_copy"],
    ),
    (
        "Mirror-BERT span of 6 characters",
        MI,
        [("s.split(s[ind : ind + span], 1)", "s.split(s[ind : ind + span + 1], 1)")],
        [MB + "test_span_mask_replaces_exactly_five_characters_at_a_uniform_position"],
    ),
    (
        "Mirror-BERT span start may be len - 5",
        MI,
        [("ind = int(rng.integers(len(s) - span))", "ind = int(rng.integers(len(s) - span + 1))")],
        [MB + "test_span_mask_replaces_exactly_five_characters_at_a_uniform_position"],
    ),
    (
        "Mirror-BERT masks sentences of 20+ characters",
        MI,
        [("MIN_MASKED_CHARS = 30", "MIN_MASKED_CHARS = 20")],
        [MB + "test_span_mask_leaves_short_sentences_and_cuts_at_the_first_occurrence"],
    ),
    (
        "Mirror-BERT self-similarity left in the denominator",
        MI,
        [('sim = sim.masked_fill(self_pair, float("-inf"))', "sim = sim")],
        [MB + "test_nt_xent_positive_is_the_mirror_negatives_are_both_views_temperature_004"],
    ),
    (
        "Mirror-BERT SimCSE-style loss (cross-view negatives only)",
        MI,
        [
            (
                "return nt_xent(*self.views(**feats), self.temperature)",
                "za, zb = self.views(**feats)\n        return F.cross_entropy(F.normalize(za, dim=-1) @ F.normalize(zb, dim=-1).T / self.temperature, torch.arange(len(za)))",
            )
        ],
        [MB + "test_forward_is_nt_xent_of_the_two_views_at_the_configured_temperature"],
    ),
    (
        "Mirror-BERT temperature default 0.05",
        MI,
        [("temperature: float = 0.04", "temperature: float = 0.05")],
        [MB + "test_defaults_are_the_papers_script"],
    ),
    (
        "Mirror-BERT drophead without rescaling",
        MI,
        [("(keep * scale)[:, None, :, None]", "keep[:, None, :, None]")],
        [MB + "test_drophead_zeroes_whole_heads_and_rescales_the_rest"],
    ),
    (
        "Mirror-BERT drophead hooks left on the returned encoder",
        MI,
        [("                h.remove()\n", "                pass\n")],
        [MB + "test_train_samples_10k_drops_the_last_batch_and_removes_drophead_hooks"],
    ),
    (
        "Mirror-BERT keeps the last partial batch",
        MI,
        [("max(1, int(c.epochs * len(items)) // per_step)", "max(1, -(-int(c.epochs * len(items)) // per_step))")],
        [MB + "test_train_samples_10k_drops_the_last_batch_and_removes_drophead_hooks"],
    ),
    (
        "Mirror-BERT dropout option ignored",
        MI,
        [("        set_dropout(encoder.model, c.dropout)\n", "")],
        [MB + "test_train_samples_10k_drops_the_last_batch_and_removes_drophead_hooks"],
    ),
]


# WhitenedCSE and SimCSE++ (issue 40): the defining mechanisms, one breakage each; the tool-made
# mutants of the same modules are in bench/mutation_tool.py (leaderboards/mutation/issue40_run2.md)
W, SP = "tests/plugins/test_whitenedcse.py::", "tests/plugins/test_simcse_plus_plus.py::"
WH, SI, CO = "plugins/whitenedcse.py", "plugins/simcse.py", "plugins/_contrastive.py"
MUTATIONS += [
    (
        "WhitenedCSE whitening matrix carries gradient",
        WH,
        [
            (
                "    with torch.no_grad():\n        cov = g.transpose(1, 2)",
                "    if True:\n        cov = g.transpose(1, 2)",
            )
        ],
        [W + "test_the_whitening_matrix_carries_no_gradient"],
    ),
    (
        "WhitenedCSE PCA whitening instead of ZCA",
        WH,
        [
            (
                "w = u @ torch.diag_embed((s + eps).rsqrt()) @ u.transpose(1, 2)",
                "w = u @ torch.diag_embed((s + eps).rsqrt())",
            )
        ],
        [W + "test_zca_not_just_any_whitening"],
    ),
    (
        "WhitenedCSE groups centred over their dimensions, not their rows",
        WH,
        [("g = g - g.mean(1, keepdim=True)", "g = g - g.mean(2, keepdim=True)")],
        [W + "test_each_shuffled_group_is_white_and_the_groups_stay_correlated"],
    ),
    (
        "WhitenedCSE output left in the shuffled order",
        WH,
        [
            (
                "return out if perm is None else out[:, torch.argsort(perm)]",
                "return out if perm is None else out[:, perm]",
            )
        ],
        [W + "test_each_shuffled_group_is_white_and_the_groups_stay_correlated"],
    ),
    (
        "WhitenedCSE one fixed permutation for every block and step",
        WH,
        [
            (
                "perm = torch.randperm(d) if shuffle",
                "perm = torch.randperm(d, generator=torch.Generator().manual_seed(0)) if shuffle",
            )
        ],
        [W + "test_every_block_is_whitened_alone_with_its_own_permutation"],
    ),
    (
        "WhitenedCSE 'reference' rows whitened view by view",
        WH,
        [
            (
                "white = shuffled_group_whitening(h[order], k,",
                "white = shuffled_group_whitening(h[torch.argsort(order)], k,",
            )
        ],
        [W + "test_which_rows_share_a_whitening"],
    ),
    (
        "WhitenedCSE head without tanh",
        WH,
        [("return torch.tanh(self.dense(h)).view(k, n, -1)", "return self.dense(h).view(k, n, -1)")],
        [W + "test_forward_is_whitening_then_dense_tanh_then_the_loss"],
    ),
    (
        "WhitenedCSE positives contrasted with each other, not with the anchor",
        WH,
        [
            (
                "F.cosine_similarity(z[0][:, None], z[v][None], dim=-1)",
                "F.cosine_similarity(z[v - 1][:, None], z[v][None], dim=-1)",
            )
        ],
        [W + "test_loss_is_the_sum_over_positive_views_against_the_first"],
    ),
    (
        "SimCSE++ negatives' pass without gradient",
        SI,
        [("        with dropout_off(self):\n", "        with dropout_off(self), torch.no_grad():\n")],
        [SP + "test_negatives_are_the_dropout_free_vectors_with_gradient_after_the_views"],
    ),
    (
        "SimCSE++ negatives' pass with dropout on",
        SI,
        [("        with dropout_off(self):\n", "        with dropout_off(torch.nn.Identity()):\n")],
        [SP + "test_negatives_are_the_dropout_free_vectors_with_gradient_after_the_views"],
    ),
    (
        "SimCSE++ negatives from a dropout view (plain SimCSE's)",
        SI,
        [
            (
                "loss = off_dropout_infonce(z1, z2, self.negatives(**tok), self.temperature)",
                "loss = off_dropout_infonce(z1, z2, z2, self.temperature)",
            )
        ],
        [SP + "test_forward_uses_dropout_views_for_positives_and_the_off_dropout_pass_for_negatives"],
    ),
    (
        "SimCSE++ dropout off only in nn.Dropout modules (attention dropout stays on)",
        CO,
        [
            (
                "    module.eval()\n    try:",
                "    [m.eval() for m in module.modules() if isinstance(m, torch.nn.Dropout)]\n    try:",
            )
        ],
        [SP + "test_dropout_off_switches_off_hidden_and_attention_dropout_and_restores_each_mode"],
    ),
    (
        "SimCSE++ dropout_off leaves the module in eval mode",
        CO,
        [("            m.training = was\n", "            pass\n")],
        [SP + "test_dropout_off_switches_off_hidden_and_attention_dropout_and_restores_each_mode"],
    ),
    (
        "SimCSE++ the negatives' self-similarity kept beside the positive",
        CO,
        [
            (
                "logits = torch.diagonal_scatter(neg, pos) / temperature",
                "logits = torch.cat([torch.diagonal_scatter(neg, pos), torch.diagonal(neg)[:, None]], 1) / temperature",
            )
        ],
        [SP + "test_off_dropout_infonce_formula_sign_and_temperature"],
    ),
    (
        "SimCSE++ DCL without standardising the views",
        CO,
        [("a = F.batch_norm(z1.float(), None, None, training=True, eps=BN_EPS)", "a = z1.float()")],
        [SP + "test_dcl_is_dimension_wise_infonce_on_batch_standardised_views"],
    ),
    (
        "SimCSE++ DCL with view 2's dimensions as rows",
        CO,
        [("corr = a.T @ b / n / temperature", "corr = b.T @ a / n / temperature")],
        [SP + "test_dcl_is_dimension_wise_infonce_on_batch_standardised_views"],
    ),
    (
        "SimCSE++ DCL term on one view against itself",
        SI,
        [
            (
                "dimension_contrastive_loss(z1, z2, self.dcl_temperature)",
                "dimension_contrastive_loss(z1, z1, self.dcl_temperature)",
            )
        ],
        [SP + "test_forward_adds_the_dcl_term_on_the_two_views_with_its_weight"],
    ),
    (
        "simcse-plus-plus DCL weight 1 instead of the reference run's 0.1",
        "plugins/simcse_plus_plus.py",
        [("    dcl_weight: float = 0.1\n", "    dcl_weight: float = 1.0\n")],
        [SP + "test_simcse_plus_plus_defaults_are_the_reference_runs_and_all_hashed"],
    ),
]

# issue 48: decoder LLM starts and the LLM-era methods (PromptEOL, echo, token prepending, LLM2Vec)
DE, LR, L2 = "tests/encode/test_decoder.py::", "tests/plugins/test_llm_readouts.py::", "tests/plugins/test_llm2vec.py::"
DEC = "benchbench/encode/decoder.py"
MUTATIONS += [
    (
        "decoder bidirectional attention left causal in the config (the eager mask)",
        DEC,
        [("    model.config.is_causal = False\n", "    model.config.is_causal = True\n")],
        [DE + "test_bidirectional_attention_lets_position_0_read_a_later_token"],
    ),
    # not listed: the modules' is_causal left True. Under transformers 5.25 the config alone decides (eager
    # and SDPA, with or without a mask; measured), so no test can see it: a defence for 4.x's SDPA path.
    (
        "decoder last token = length - 1 (right padding's rule, wrong under left padding)",
        DEC,
        [("return (attention_mask.to(torch.long) * (pos + 1)).argmax(1)", "return attention_mask.sum(1) - 1")],
        [DE + "test_last_token_index_under_both_paddings", DE + "test_last_token_pooling_reads_the_last_real_token"],
    ),
    (
        "decoder a long text cut at its end (the template's end, read by the last token, is lost)",
        DEC,
        [("            if k > self.seq_length:\n", "            if False:\n")],
        [DE + "test_a_long_text_is_cut_inside_the_text_never_the_template"],
    ),
    (
        "PromptEOL template without the closing quote",
        "plugins/prompteol.py",
        [
            (
                'TEMPLATE = \'This sentence : "{text}" means in one word:"\'',
                "TEMPLATE = 'This sentence : \"{text}\" means in one word:'",
            )
        ],
        [LR + "test_defaults_are_the_published_ones"],
    ),
    (
        "PromptEOL read by mean pooling instead of the last token",
        "plugins/prompteol.py",
        [('        pooling="last",\n', '        pooling="mean",\n')],
        [LR + "test_each_method_builds_the_readout_its_reference_comparison_checks"],
    ),
    (
        "PromptEOL sentence rules dropped (no final period, double quotes kept)",
        "plugins/prompteol.py",
        [("prompteol_sentence(text.strip())", "text.strip()")],
        [LR + "test_prompteol_equals_the_reference_batcher"],
    ),
    (
        "echo pools the first copy of the text instead of the second",
        "plugins/echo.py",
        [("Query:{!%%text%%}\\nQuery again:{%%text%%}", "Query:{%%text%%}\\nQuery again:{!%%text%%}")],
        [LR + "test_echo_pools_exactly_the_second_occurrence_and_the_end_token"],
    ),
    (
        "echo's ! (read, not pooled) inverted",
        "plugins/echo.py",
        [('keep = 0 if piece.startswith("!") else 1', 'keep = 1 if piece.startswith("!") else 0')],
        [LR + "test_echo_equals_the_reference_parser_and_pooling"],
    ),
    (
        "token prepending one layer past tp_exit",
        "plugins/token_prepending.py",
        [
            (
                "for k in range(self.tp_start, min(self.tp_exit, len(layers)))",
                "for k in range(self.tp_start, min(self.tp_exit + 1, len(layers)))",
            )
        ],
        [LR + "test_token_prepending_overwrites_the_placeholder_in_its_layers_only"],
    ),
    (
        "token prepending prepends the first token's state, not the last's",
        "plugins/token_prepending.py",
        [("h[rows, where] = h[:, -1]", "h[rows, where] = h[:, 0]")],
        [LR + "test_token_prepending_equals_the_reference_forward"],
    ),
    (
        "LLM2Vec stage 1 left causal",
        "plugins/llm2vec.py",
        [
            (
                'load_decoder(name, attention="bidirectional", lm_head=True, dtype=dtype)',
                'load_decoder(name, attention="causal", lm_head=True, dtype=dtype)',
            )
        ],
        [L2 + "test_bidirectional_attention_sees_later_tokens"],
    ),
    (
        "LLM2Vec MNTP without the label shift (masked-token prediction at the token itself)",
        "plugins/llm2vec.py",
        [
            ("    target = labels[:, 1:]\n", "    target = labels\n"),
            ("logits = head(hidden[:, :-1][where])", "logits = head(hidden[where])"),
        ],
        [L2 + "test_mntp_loss_and_gradients_equal_the_reference"],
    ),
    (
        "LLM2Vec SimCSE stage without its scale (cosine logits at temperature 1)",
        "plugins/llm2vec.py",
        [("@ F.normalize(d.float(), dim=-1).T * scale", "@ F.normalize(d.float(), dim=-1).T")],
        [L2 + "test_simcse_loss_equals_hard_negative_nll_loss_scale_20"],
    ),
    (
        "LLM2Vec SimCSE stage's two views share one dropout mask (one pass used twice)",
        "plugins/llm2vec.py",
        [
            (
                "        d = self.embed(input_ids, attention_mask, pool_mask)\n",
                "        d = q\n",
            )
        ],
        [L2 + "test_simcse_step_equals_the_reference_compute_loss"],
    ),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    chosen = [m for m in MUTATIONS if a.only.lower() in m[0].lower()]
    rows, t0 = [], time.time()
    with tempfile.TemporaryDirectory(prefix="bb-mut-new-") as tmp:
        dst = Path(tmp)
        env = M.make_copy(dst)
        ok, out = M.run_tests(dst, env, sorted({t for m in chosen for t in m[3]}))
        if not ok:
            print(f"the unmutated copy fails its tests: {out}")
            return 2
        for name, rel, edits, tests in chosen:
            original = (dst / rel).read_text()
            try:
                (dst / rel).write_text(M.apply(original, edits, rel))
                passed, out = M.run_tests(dst, env, tests)
            finally:
                (dst / rel).write_text(original)
            rows.append((name, rel, not passed, out))
            print(f"{'caught' if not passed else 'SURVIVED'}: {name} ({out})", flush=True)
    print("\n| mutation | file | caught by |\n|---|---|---|")
    for name, rel, caught, out in rows:
        print(f"| {name} | {rel} | {out if caught else '**NOT CAUGHT**'} |")
    print(f"\n{sum(r[2] for r in rows)}/{len(rows)} caught in {time.time() - t0:.0f} s")
    return 0 if all(r[2] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
