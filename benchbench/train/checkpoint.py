"""The training loop's checkpoint format: what ``train_loop`` writes every interval and resumes from.

A checkpoint holds the model, optimizer, scheduler and every RNG state plus the loop counters,
written to a temporary folder (``.tmp-step-N``) and renamed into place (``step-N``) only when complete.

Checkpoints hold no pickle: tensors go to safetensors files (the model through
``safetensors.torch.save_model``, which drops the duplicates of tied weights), everything else (optimizer
hyper-parameters, scheduler counters, Python/NumPy RNG states, loop counters) to JSON, and
``benchbench_state.json`` (written last) lists every file's sha256 and carries a checksum of its own
(the loop counters it holds decide which data comes next, so a changed digit there would resume a
different run). The two newest checkpoints are kept: one whose files do not match is ignored with a
loud warning naming it and the run resumes from the older intact one, or from the start, which is
exact too (the run is a pure function of its seed). A full disk while writing a checkpoint removes the
partial folder and keeps the previous checkpoints.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import json
import logging
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from benchbench.core.errors import DataError
from benchbench.store.files import atomic_write_json, check_inside, safe_mkdirs, sha256_file

if TYPE_CHECKING:
    from benchbench.train.loop import LoopState

log = logging.getLogger(__name__)

META = "benchbench_state.json"
# 3: the state file carries a checksum of its own; 2: safetensors + JSON, the state file unchecked;
# 1 (unmarked): Accelerate save_state with pickle
CHECKPOINT_FORMAT = 3
_OLD_FORMATS = {  # by str(format): a damaged field may hold anything
    "2": "its state file has no checksum of its own, so its step counters cannot be trusted",
    "1": "pickle-based Accelerate state; nothing is unpickled",
    "None": "pickle-based Accelerate state; nothing is unpickled",
}
KEEP_CHECKPOINTS = 2  # the newest and one older: a damaged newest one then costs one interval, not the run


def _checkpoints(root: Path) -> list[tuple[int, Path]]:
    """The finished checkpoint folders under ``root`` (``step-N``; ``.tmp-step-N`` are unfinished),
    newest first by the step in their name."""
    if not root.is_dir():
        return []
    found = []
    for d in root.glob("step-*"):
        m = re.fullmatch(r"step-(\d+)", d.name)
        if m and d.is_dir():
            found.append((int(m.group(1)), d))
    return sorted(found, reverse=True)


def _meta_checksum(meta: dict) -> str:
    """The state file's checksum of itself: every field but ``checksum``, as canonical JSON."""
    body = {k: v for k, v in meta.items() if k != "checksum"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _read_meta(ckpt: Path, step: int, fingerprint: str) -> tuple[dict | None, str | None]:
    """(the state file of ``ckpt``, None) when it is whole and this run's, else (None, why not)."""
    f = ckpt / META
    try:
        meta = json.loads(f.read_text())
    except FileNotFoundError:
        return None, f"its state file {f} is missing"
    except (OSError, ValueError) as e:
        return None, f"its state file {f} is unreadable (truncated or damaged: {e})"
    if not isinstance(meta, dict):
        return None, f"its state file {f} is not a JSON object (damaged)"
    if meta.get("format") != CHECKPOINT_FORMAT:
        why = _OLD_FORMATS.get(str(meta.get("format")), "an unknown format")
        return None, f"it was written by another benchbench version (format {meta.get('format')}: {why})"
    if meta.get("checksum") != _meta_checksum(meta):
        return None, f"its state file {f} does not match its own checksum (damaged or edited)"
    if meta.get("fingerprint") != fingerprint:
        return None, f"it belongs to another run (fingerprint {meta.get('fingerprint')} != {fingerprint})"
    if meta.get("step") != step:
        return None, f"its state file {f} is the one of step {meta.get('step')} (copied from another checkpoint?)"
    return meta, None


def _damage(ckpt: Path, meta: dict, rank: int) -> str | None:
    """Why ``ckpt`` cannot be resumed exactly by process ``rank`` (a missing or changed file), or None."""
    files = meta.get("files", {})
    needed = [n for n in files if not n.startswith("rng-")] + [f"rng-{rank}.json", f"rng-{rank}.safetensors"]
    for name in needed:
        if name not in files:
            return f"{name} is not listed in {META} (written by a run with another number of processes?)"
        f = ckpt / name
        if not f.is_file():
            return f"{f} is missing"
        if sha256_file(f) != files[name]:
            return f"{f} does not match its checksum in {META} (damaged or edited)"
    return None


def pick_checkpoint(root: Path, fingerprint: str, max_step: int, rank: int) -> tuple[Path, dict] | None:
    """The newest checkpoint of this run under ``root`` whose state file and every file match their
    checksums, with its state. Each one passed over is named in a warning (never resumed from
    silently), and so is the older one used instead."""
    passed: list[Path] = []
    for step, ckpt in _checkpoints(root):
        if step > max_step:  # a longer budget's: another run (the budget is in the fingerprint)
            continue
        meta, why = _read_meta(ckpt, step, fingerprint)
        why = why or _damage(ckpt, meta, rank)
        if why is None:
            if passed:
                log.warning("resuming from the older intact checkpoint %s (step %d) instead", ckpt, step)
            return ckpt, meta
        log.warning(
            "NOT resuming from checkpoint %s: %s. Falling back to an older intact checkpoint or to the "
            "start (exact either way: the run is a pure function of its seed); delete the folder to "
            "silence this.",
            ckpt,
            why,
        )
        passed.append(ckpt)
    if passed:
        log.warning("no intact checkpoint left in %s: this training starts from step 0", root)
    return None


# -- a state dict as safetensors + JSON: tensors go to the safetensors file under generated names, the
# rest of the (nested) structure to JSON. Written by hand because neither safetensors nor torch stores a
# nested optimizer/scheduler state without pickle.


def _split_tensors(obj: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(obj, torch.Tensor):
        name = f"t{len(tensors)}"
        tensors[name] = obj.detach().to("cpu").contiguous().clone()  # clone: no shared storage for safetensors
        return {"__tensor__": name}
    if isinstance(obj, dict):
        if all(isinstance(k, str) for k in obj):
            return {"__map__": {k: _split_tensors(v, tensors) for k, v in obj.items()}}
        return {"__items__": [[_split_tensors(k, tensors), _split_tensors(v, tensors)] for k, v in obj.items()]}
    if isinstance(obj, tuple):
        return {"__tuple__": [_split_tensors(v, tensors) for v in obj]}
    if isinstance(obj, list):
        return [_split_tensors(v, tensors) for v in obj]
    if isinstance(obj, np.ndarray):
        return {"__ndarray__": obj.tolist(), "dtype": str(obj.dtype)}
    if isinstance(obj, np.generic):
        return obj.item()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"cannot store a {type(obj).__name__} in a checkpoint without pickle")


def _join_tensors(obj: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(obj, list):
        return [_join_tensors(v, tensors) for v in obj]
    if isinstance(obj, dict):
        if "__tensor__" in obj:
            return tensors[obj["__tensor__"]]
        if "__map__" in obj:
            return {k: _join_tensors(v, tensors) for k, v in obj["__map__"].items()}
        if "__items__" in obj:
            return {_join_tensors(k, tensors): _join_tensors(v, tensors) for k, v in obj["__items__"]}
        if "__tuple__" in obj:
            return tuple(_join_tensors(v, tensors) for v in obj["__tuple__"])
        if "__ndarray__" in obj:
            return np.asarray(obj["__ndarray__"], dtype=obj["dtype"])
    return obj


def _save_tree(obj: Any, folder: Path, name: str) -> None:
    from safetensors.torch import save_file

    tensors: dict[str, torch.Tensor] = {}
    tree = _split_tensors(obj, tensors)
    save_file(tensors, str(folder / f"{name}.safetensors"))
    (folder / f"{name}.json").write_text(json.dumps(tree))


def _load_tree(folder: Path, name: str) -> Any:
    from safetensors.torch import load_file

    return _join_tensors(
        json.loads((folder / f"{name}.json").read_text()), load_file(str(folder / f"{name}.safetensors"))
    )


def _rng_state(device: torch.device) -> dict[str, Any]:
    import random

    st = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if device.type == "cuda":
        st["cuda"] = torch.cuda.get_rng_state_all()
    return st


def _set_rng_state(st: dict[str, Any]) -> None:
    import random

    random.setstate(st["python"])
    np.random.set_state(st["numpy"])
    torch.set_rng_state(st["torch"])
    if "cuda" in st:
        torch.cuda.set_rng_state_all(st["cuda"])


def check_root(root: Path, within: Path | None = None) -> Path:
    """The folder checkpoints under ``root`` are checked against: ``within`` (the run's ``--output``),
    default ``root``'s parent (the run folder); an ``UnsafePathError`` naming the link when ``root``
    (the checkpoints folder) is a link or is reached through one below that folder. Resuming from, writing
    into or pruning a linked checkpoints folder would read or change the link target's files."""
    top = Path(root).parent if within is None else Path(within)
    check_inside(Path(root) / "step-0", top)
    return top


def remove_checkpoints(root: Path, within: Path | None = None) -> None:
    """Delete a run's checkpoints (after its result is safely stored, or on ``--retrain``), those of
    the loops a method runs in sub-folders too (Trans-Encoder's phases). ``root`` is checked against
    ``within`` (the run's ``--output``; default ``root``'s parent, the run folder) first: a checkpoints
    folder that is a link, or is reached through one, is refused (``UnsafePathError``), never walked,
    since deleting "its" ``step-*`` folders would delete the link target's."""
    check_root(root, within)
    if Path(root).is_dir():
        for d in list(Path(root).rglob("step-*")) + list(Path(root).rglob(".tmp-step-*")):
            if d.is_dir() and re.fullmatch(r"(\.tmp-)?step-\d+", d.name):
                shutil.rmtree(d, ignore_errors=True)


def save_checkpoint(
    acc,
    model,
    optimizer,
    scheduler,
    root: Path,
    state: LoopState,
    fingerprint: str,
    within: Path | None = None,
) -> None:
    """Write ``step-N``: the main process writes the model, optimizer and scheduler, every process its
    RNG state, into a temporary folder that the main process renames into place once the state file
    (with every file's checksum, and its own) is written; then all but the KEEP_CHECKPOINTS newest are
    dropped. A write that fails (a full disk) removes the temporary folder and keeps the others.
    ``within`` is the folder the run writes in (``--output``; default ``root``'s parent, the run folder):
    the checkpoint folders are checked against it, so a linked ``checkpoints`` folder (or any linked
    folder between them) is refused before anything is written, renamed or pruned through it."""
    top = check_root(root, within)
    final = check_inside(root / f"step-{state.step:09d}", top)  # a linked step folder (or checkpoints folder)
    tmp = check_inside(root / f".tmp-step-{state.step:09d}", top)  # is refused, never written or deleted through
    try:
        _write_checkpoint(acc, model, optimizer, scheduler, tmp, state, fingerprint, top)
    except Exception as e:
        if acc.is_main_process:
            shutil.rmtree(tmp, ignore_errors=True)
        cause = _os_error(e)
        if cause is None:
            raise
        raise _checkpoint_write_error(root, state.step, cause, lambda: _checkpoint_bytes(acc, model, optimizer)) from e
    if acc.is_main_process:
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        _prune(root, state.step)
    acc.wait_for_everyone()


def _write_checkpoint(
    acc, model, optimizer, scheduler, tmp: Path, state: LoopState, fingerprint: str, top: Path
) -> None:
    from safetensors.torch import save_model

    if acc.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        safe_mkdirs(tmp, top)  # from the run's root through folder descriptors: a link on the way is refused
    acc.wait_for_everyone()
    if acc.is_main_process:
        save_model(acc.unwrap_model(model), str(tmp / "model.safetensors"))  # drops tied duplicates, keeps one
        _save_tree(optimizer.state_dict(), tmp, "optimizer")
        if scheduler is not None:
            _save_tree(scheduler.state_dict(), tmp, "scheduler")
    _save_tree(_rng_state(acc.device), tmp, f"rng-{acc.process_index}")
    acc.wait_for_everyone()
    if acc.is_main_process:
        meta = {
            "format": CHECKPOINT_FORMAT,
            "fingerprint": fingerprint,
            "step": state.step,
            "processes": acc.num_processes,
            "files": {f.name: sha256_file(f) for f in sorted(tmp.iterdir()) if f.is_file()},
            "state": dataclasses.asdict(state),
        }
        meta["checksum"] = _meta_checksum(meta)
        atomic_write_json(tmp / META, meta, root=tmp)


def _prune(root: Path, step: int) -> None:
    """Keep checkpoint ``step`` (just written) and the newest older ones, KEEP_CHECKPOINTS in all; drop
    the rest, any newer one (a resumed run passed over it: damaged, or another run's) and unfinished
    folders."""
    older = [d for s, d in _checkpoints(root) if s < step]
    for d in older[KEEP_CHECKPOINTS - 1 :] + [d for s, d in _checkpoints(root) if s > step]:
        shutil.rmtree(d, ignore_errors=True)
    for d in root.glob(".tmp-step-*"):
        shutil.rmtree(d, ignore_errors=True)


def _os_error(e: BaseException) -> tuple[int, str] | None:
    """(errno, message) of an OS-level write failure: an OSError, or safetensors' SafetensorError, which
    carries the OS error only in its text ("... No space left on device (os error 28)")."""
    if isinstance(e, OSError) and e.errno:
        return e.errno, e.strerror or str(e)
    m = re.search(r"os error (\d+)", str(e))
    if m:
        return int(m.group(1)), os.strerror(int(m.group(1)))
    return None


def _checkpoint_bytes(acc, model, optimizer) -> int | None:
    """About what a checkpoint writes: the model's and the optimizer state's tensor bytes."""
    from benchbench.store.space import tensor_bytes

    return tensor_bytes([acc.unwrap_model(model), optimizer.state_dict()])


def _checkpoint_write_error(
    root: Path, step: int, cause: tuple[int, str], needed: Callable[[], int | None] | None = None
) -> DataError:
    """What to do when checkpoint ``step`` could not be written under ``root``, and what is kept; for a
    full disk, the space a checkpoint needs (``needed``, called only then) and the space free there."""
    root = root.absolute()
    kept = [d for s, d in _checkpoints(root) if s < step and (d / META).is_file()]
    resume = f"it resumes from the last good checkpoint, {kept[0]}" if kept else "no earlier checkpoint was kept"
    code, text = cause
    if code in (errno.ENOSPC, errno.EDQUOT):
        from benchbench.store.space import free_bytes

        need, free = needed() if needed is not None else None, free_bytes(root)
        sizes = ", ".join(
            ([f"needs about {need / 1e6:,.1f} MB"] if need else []) + ([f"{free / 1e6:,.1f} MB free"] if free else [])
        )
        return DataError(
            f"No space left on the device holding {root}{f' ({sizes})' if sizes else ''}: training checkpoint "
            f"step {step} could not be written "
            f"(removed, nothing partial is left). Free space there (old run folders under the results' runs/, "
            f"embedding caches under $BENCHBENCH_CACHE or ~/.cache/benchbench) or choose another --output, then "
            f"run the same command: {resume}."
        )
    return DataError(
        f"Training checkpoint step {step} could not be written under {root}: {text} (errno {code}). Make that "
        f"folder writable or choose another --output, then run the same command: {resume}."
    )


def load_checkpoint(acc, model, optimizer, scheduler, ckpt: Path) -> None:
    from safetensors.torch import load_model

    # strict: every weight comes back (tied duplicates, dropped at save, are restored through their tie)
    load_model(acc.unwrap_model(model), str(ckpt / "model.safetensors"), strict=True, device=str(acc.device))
    optimizer.load_state_dict(_load_tree(ckpt, "optimizer"))
    if scheduler is not None:
        scheduler.load_state_dict(_load_tree(ckpt, "scheduler"))
    _set_rng_state(_load_tree(ckpt, f"rng-{acc.process_index}"))
