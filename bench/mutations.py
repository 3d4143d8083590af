"""Mutation check for method fidelity (issue 11): apply each listed one-line breakage, alone, to a
temporary COPY of the package, run the tests meant to catch it there, and print mutation | caught by.

Why a copy: the working tree is shared and the package is installed editable; mutating it in place
would break everyone else's runs. The copy's packages are put first on PYTHONPATH under their import
names (benchbench, benchbench_plugins -> plugins/, benchbench_tasks -> tasks/), ahead of the editable
finder, and a sanity import checks that the copy is what gets imported.

    OMP_NUM_THREADS=1 python bench/mutations.py [--only SUBSTRING] [--json OUT]

Exit status 1 if any mutation survives (or a target string no longer matches the code: then the
mutation list must be updated with the code; tests/project/test_mutations_meta.py checks that in CI).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
F = "tests/plugins/test_method_fidelity.py::"
FILES = "tests/store/test_files.py::"
WRITES = "tests/store/test_symlink_writes.py::"
FP = "tests/encode/test_fingerprint_writes.py::"

# (name, file, [(old, new), ...], tests)
MUTATIONS: list[tuple[str, str, list[tuple[str, str]], list[str]]] = [
    (
        "TSDAE noise removed entirely",
        "plugins/tsdae.py",
        [("src = self.encoder.tokenize(self.noise(items, rng))", "src = self.encoder.tokenize(items)")],
        [F + "test_tsdae_noise_corrupts_the_input_and_leaves_the_target_clean"],
    ),
    (
        "TSDAE noise applied to the target instead of the input",
        "plugins/tsdae.py",
        [
            (
                "src = self.encoder.tokenize(self.noise(items, rng))\n        tgt = self.encoder.tokenize(items)",
                "src = self.encoder.tokenize(items)\n        tgt = self.encoder.tokenize(self.noise(items, rng))",
            )
        ],
        [F + "test_tsdae_noise_corrupts_the_input_and_leaves_the_target_clean"],
    ),
    (
        "TSDAE loss summed instead of averaged over tokens",
        "plugins/tsdae.py",
        [
            (
                "return F.cross_entropy(logits.float(), labels[where])",
                'return F.cross_entropy(logits.float(), labels[where], reduction="sum")',
            )
        ],
        [F + "test_tsdae_loss_equals_denoising_auto_encoder_loss"],
    ),
    (
        "attention dropout dropped from the one-vector shortcut",
        "plugins/tsdae.py",
        [("p = core.dropout.p if self.training else 0.0", "p = 0.0")],
        [F + "test_one_vector_shortcut_keeps_attention_dropout_in_training"],
    ),
    (
        "noise RNG fixed across micro-batches",
        "benchbench/train/loop.py",
        [("np.random.default_rng([seed, state.micro, rank])", "np.random.default_rng([seed, 0, rank])")],
        [F + "test_collate_rng_is_fresh_per_micro_batch"],
    ),
    (
        "scheduler stepped once per micro-batch",
        "benchbench/train/loop.py",
        [
            (
                "            if scheduler is not None:\n                scheduler.step()\n            state.step += 1",
                "            if scheduler is not None:\n                for _ in range(loop.grad_accum):\n"
                "                    scheduler.step()\n            state.step += 1",
            ),
        ],
        [F + "test_scheduler_steps_once_per_optimizer_step"],
    ),
    (
        "CT labels inverted",
        "plugins/ct.py",
        [
            (
                "binary_cross_entropy_with_logits(logits, labels.float(),",
                "binary_cross_entropy_with_logits(logits, 1 - labels.float(),",
            )
        ],
        [F + "test_ct_loss_equals_contrastive_tension_loss"],
    ),
    (
        "CT cosine instead of dot product",
        "plugins/ct.py",
        [("logits = (a.float() * b.float()).sum(-1)", "logits = F.cosine_similarity(a.float(), b.float(), dim=-1)")],
        [F + "test_ct_loss_equals_contrastive_tension_loss"],
    ),
    (
        "CT scheduler removed",
        "plugins/ct.py",
        [("make_scheduler=lambda o: torch.optim.lr_scheduler.LambdaLR(o, segmented_lr(c.segment_steps)),", "")],
        [F + "test_ct_uses_the_segmented_schedule"],
    ),
    (
        "SimCSE dot product instead of cosine",
        "plugins/simcse.py",
        [
            (
                "sim = F.cosine_similarity(z1.float()[:, None], z2.float()[None], dim=-1) / self.temperature",
                "sim = (z1.float() @ z2.float().T) / self.temperature",
            )
        ],
        [F + "test_simcse_loss_equals_mnrl_scale_20_on_non_unit_vectors"],
    ),
    (
        "SimCSE MLP never used at test time (paper's setting)",
        "plugins/simcse.py",
        [('if c.mlp == "train_and_test":\n            return MLPEncoder', "if False:\n            return MLPEncoder")],
        [F + "test_simcse_keeps_the_mlp_at_test_time_and_not_the_training_length"],
    ),
    (
        "MLM pretrained head never loaded",
        "plugins/mlm.py",
        [
            (
                "model = pretrained or AutoModelForMaskedLM.from_config(encoder.model.config)",
                "model = AutoModelForMaskedLM.from_config(encoder.model.config)",
            )
        ],
        [F + "test_mlm_train_uses_the_checkpoint_head"],
    ),
    (
        "BERT-flow NLL without the log-determinant",
        "plugins/bertflow.py",
        [("return -((log_pz + logdet) / self.dim).mean()", "return -(log_pz / self.dim).mean()")],
        [F + "test_flow_nll_is_the_exact_change_of_variables"],
    ),
    (
        "gradient clipping removed",
        "benchbench/train/loop.py",
        [("if acc.sync_gradients and loop.max_grad_norm:", "if False:")],
        [F + "test_gradient_clipping_is_on_by_default_at_norm_1"],
    ),
    # beyond the 14: the other ways clipping or the head could silently go
    (
        "(extra) clipping default off in LoopConfig",
        "benchbench/train/loop.py",
        [("max_grad_norm: float | None = 1.0", "max_grad_norm: float | None = None")],
        [F + "test_gradient_clipping_is_on_by_default_at_norm_1"],
    ),
    (
        "(extra) TSDAE max_grad_norm not passed to the loop",
        "benchbench/train/fit.py",  # TSDAE (like every transformer method) builds its loop through fit
        [
            (
                "LoopConfig.from_config(method.config),",
                "LoopConfig.from_config(method.config, max_grad_norm=None),",
            )
        ],
        [F + "test_every_method_passes_max_grad_norm_to_the_loop"],
    ),
    (
        "(extra) SimCSE training length leaks into the encoder",
        "plugins/simcse.py",
        [
            (
                "ctx.load_encoder(pooling=c.pooling, train_max_seq_length=c.max_seq_length)",
                "ctx.load_encoder(pooling=c.pooling, max_seq_length=c.max_seq_length)",
            )
        ],
        [F + "test_simcse_keeps_the_mlp_at_test_time_and_not_the_training_length"],
    ),
    (
        "(extra) TSDAE decoder head never loaded",
        "plugins/tsdae.py",
        [("decoder = pretrained  # the checkpoint", "decoder = None  # the checkpoint")],
        [F + "test_pretrained_heads_load_from_a_local_and_a_sentence_transformers_folder"],
    ),
    # issue 50: one root check for every write (benchbench/store/files.py and the writers routed through it)
    (
        "(extra) root check: the folder walk follows a link",
        "benchbench/store/files.py",
        [("nxt = os.open(part, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)", "nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)")],
        [FILES + "test_the_fd_walk_refuses_a_swap_after_the_last_check"],
    ),
    (
        "(extra) root check: folders made before the path is checked",
        "benchbench/store/files.py",
        [('_refuse_link(here, "" if i == len(parts) - 1 else f" (a folder on the way to {path})")', "pass")],
        [FILES + "test_safe_mkdirs_refuses_before_making_anything"],
    ),
    (
        "(extra) root check: the temp file opened by its path, not in the held folder",
        "benchbench/store/files.py",
        [
            (
                "return os.open(tmp_name if dfd is not None else tmp, _OPEN_FLAGS, 0o666, **at)",
                "return os.open(tmp, _OPEN_FLAGS, 0o666)",
            )
        ],
        [FILES + "test_a_folder_swapped_after_the_walk_opened_it_keeps_the_write_in_the_root"],
    ),
    (
        "(extra) root check: the temp file renamed by its path",
        "benchbench/store/files.py",
        [("os.replace(tmp_name, name, src_dir_fd=dfd, dst_dir_fd=dfd)", "os.replace(tmp, path)")],
        [FILES + "test_a_folder_swapped_after_the_walk_opened_it_keeps_the_write_in_the_root"],
    ),
    (
        "(extra) root check: a pinned folder handed out by its path",
        "benchbench/store/files.py",
        [("yield _pinned(fd) or Path(path)", "yield Path(path)")],
        [FILES + "test_a_pinned_folder_keeps_its_writes_when_swapped_after_it_is_opened"],
    ),
    (
        "(extra) root check: the run-folder lock without --output as its root",
        "benchbench/train/reuse.py",
        [
            (
                'with hold(lock, f"run folder {run_dir}", root=root) if main',
                'with hold(lock, f"run folder {run_dir}") if main',
            )
        ],
        [WRITES + "test_a_symlinked_parent_of_the_run_folder_is_refused_and_nothing_lands_outside"],
    ),
    (
        "(extra) root check: the encoder saved by its path, not into the held folder",
        "benchbench/train/reuse.py",
        [("            encoder.save(folder)", '            encoder.save(run_dir / "encoder")')],
        [WRITES + "test_a_run_folder_swapped_for_a_link_while_the_encoder_is_saved_keeps_it_inside"],
    ),
    (
        "(extra) root check: the record's folder made by a plain mkdir",
        "benchbench/run/runner.py",
        [
            (
                "folder = safe_mkdirs(plan.store.path(key).parent, plan.store.root)",
                "folder = plan.store.path(key).parent",
            )
        ],
        [WRITES + "test_a_symlinked_records_parent_is_refused_before_any_folder_is_made_outside"],
    ),
    (
        "(extra) root check: the record store's folders made by a plain mkdir",
        "benchbench/store/results.py",
        [
            (
                "safe_mkdirs(path.parent, self.root)  # checked first",
                "path.parent.mkdir(parents=True, exist_ok=True)  # checked first",
            )
        ],
        [FILES + "test_a_folder_swapped_for_a_link_after_any_check_never_takes_a_record_outside"],
    ),
    # issue 50: scores keyed by content (fingerprints, labels, data fingerprints on reuse)
    (
        "fingerprint hashes only the first tensor",
        "benchbench/encode/models.py",
        [("for key, tensor in sorted(state_dict.items()):", "for key, tensor in sorted(state_dict.items())[:1]:")],
        [FP + "test_an_in_place_write_changes_the_fingerprint"],
    ),
    (
        "fingerprint hashes the tensors' shapes, not their bytes",
        "benchbench/encode/models.py",
        [("h.update(memoryview(t.view(torch.uint8).numpy()))", "h.update(str(tuple(t.shape)).encode())")],
        [FP + "test_an_in_place_write_changes_the_fingerprint"],
    ),
    (
        "fingerprint leaves out pooling and max length",
        "benchbench/encode/models.py",
        [('        h.update(settings.encode())\n        return f"tf-', '        return f"tf-')],
        ["tests/encode/test_cache_key.py::test_a_setting_that_changes_vectors_changes_the_cache_key"],
    ),
    (
        "cross-encoder fingerprint leaves out its max length",
        "benchbench/encode/cross_encoder.py",
        [('f"|{self.max_length}|{type(tok).__name__}', 'f"|{type(tok).__name__}')],
        [
            "tests/encode/test_cross_encoder.py::test_each_field_that_changes_a_cross_encoders_scores_changes_its_fingerprint"
        ],
    ),
    (
        "a modules.json path outside the folder is accepted",
        "benchbench/encode/model_names.py",
        [("            why = _module_path_problem(folder, rel)", "            why = None")],
        ["tests/encode/test_model_labels.py::test_a_module_path_the_label_cannot_cover_is_refused"],
    ),
    (
        "a stored record is reused whatever its data fingerprints say",
        "benchbench/run/runner.py",
        [("    return bool(changed)\n", "    return False\n")],
        [
            "tests/store/test_hf_copy_changes.py::test_a_copy_without_a_spec_fingerprint_is_rescored_after_its_rows_change"
        ],
    ),
    (
        "an HF copy's fingerprint follows the file system's listing order",
        "benchbench/store/hf.py",
        [("    for rel in sorted(r for r in files if", "    for rel in (r for r in files if")],
        ["tests/store/test_hf_copy_changes.py::test_the_copy_fingerprint_does_not_depend_on_the_listing_order"],
    ),
]


def apply(text: str, edits: list[tuple[str, str]], where: str) -> str:
    for old, new in edits:
        if text.count(old) != 1:
            raise LookupError(f"{where}: mutation target found {text.count(old)} times (must be exactly 1): {old!r}")
        text = text.replace(old, new)
    return text


def make_copy(dst: Path) -> dict[str, str]:
    """Copy the package, plugins, tasks and tests; return the environment that imports the copy."""
    ign = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
    for d in ("benchbench", "plugins", "tasks", "tests"):
        shutil.copytree(ROOT / d, dst / d, ignore=ign)
    shutil.copy(ROOT / "pyproject.toml", dst / "pyproject.toml")
    links = dst / "_path"
    links.mkdir()
    for name, target in (
        ("benchbench", "benchbench"),
        ("benchbench_plugins", "plugins"),
        ("benchbench_tasks", "tasks"),
    ):
        (links / name).symlink_to(dst / target)
    env = {
        **os.environ,
        "PYTHONPATH": str(links) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.setdefault("BENCHBENCH_DATA", str(ROOT.parent / "shared" / "data"))
    check = subprocess.run(
        [
            sys.executable,
            "-c",
            "import benchbench, benchbench_plugins.tsdae as t; print(benchbench.__file__); print(t.__file__)",
        ],
        cwd=dst,
        env=env,
        capture_output=True,
        text=True,
    )
    files = check.stdout.split()
    if check.returncode or len(files) != 2 or not all(f.startswith(str(dst)) for f in files):
        raise RuntimeError(f"the copy is not what gets imported: {check.stdout} {check.stderr[-500:]}")
    return env


def run_tests(dst: Path, env: dict, tests: list[str]) -> tuple[bool, str]:
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m", "", *tests],  # slow ones too
        cwd=dst,
        env=env,
        capture_output=True,
        text=True,
    )
    failed = [ln.split()[1] for ln in r.stdout.splitlines() if ln.startswith(("FAILED", "ERROR"))]
    return r.returncode == 0, (
        ", ".join(failed) or r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stderr[-300:]
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="", help="run only mutations whose name contains this")
    ap.add_argument("--json", default="", help="write the table as JSON here")
    ap.add_argument(
        "--range", default="", help="A:B: only mutations A..B-1 of the list (to split the run over processes)"
    )
    args = ap.parse_args()
    lo, _, hi = args.range.partition(":")
    listed = MUTATIONS[int(lo or 0) : int(hi) if hi else None]
    chosen = [m for m in listed if args.only.lower() in m[0].lower()]
    rows, t0 = [], time.time()
    with tempfile.TemporaryDirectory(prefix="bb-mut-") as tmp:
        dst = Path(tmp)
        env = make_copy(dst)
        ok, out = run_tests(dst, env, sorted({t for m in chosen for t in m[3]}))
        if not ok:
            print(f"the unmutated copy fails its tests: {out}")
            return 2
        for name, rel, edits, tests in chosen:
            original = (dst / rel).read_text()
            try:
                (dst / rel).write_text(apply(original, edits, rel))
                passed, out = run_tests(dst, env, tests)
            finally:
                (dst / rel).write_text(original)
            rows.append({"mutation": name, "file": rel, "caught": not passed, "caught_by": out if not passed else "-"})
            print(f"{'caught' if not passed else 'SURVIVED'}: {name} ({out})", flush=True)
    print("\n| mutation | file | caught by |\n|---|---|---|")
    for r in rows:
        print(f"| {r['mutation']} | {r['file']} | {r['caught_by'] if r['caught'] else '**NOT CAUGHT**'} |")
    print(f"\n{sum(r['caught'] for r in rows)}/{len(rows)} caught in {time.time() - t0:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "seconds": round(time.time() - t0, 1)}, indent=1))
    return 0 if all(r["caught"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
