"""``remove_checkpoints`` (after the encoder is stored, and on ``--retrain``) removes the checkpoints of
loops a method runs in sub-folders of its checkpoint folder (Trans-Encoder's phases), not only its
own: a ``--retrain`` must not resume an interrupted phase. Anything else there stays."""

from __future__ import annotations

from benchbench.train.checkpoint import remove_checkpoints


def test_checkpoints_in_sub_folders_are_removed_and_nothing_else(tmp_path):
    root = tmp_path / "checkpoints"
    made = [
        root / "step-000000004",
        root / ".tmp-step-000000006",
        root / "trans-encoder" / "c2-cross-1020" / "step-000000006",
        root / "trans-encoder" / "c2-cross-1020" / ".tmp-step-000000008",
    ]
    for d in made:
        d.mkdir(parents=True)
        (d / "model.safetensors").write_bytes(b"x")
    kept = [root / "trans-encoder" / "notes.txt", root / "step-notes", root / "trans-encoder" / "step-x"]
    kept[0].write_text("keep")
    kept[1].write_text("a file named like a checkpoint")
    kept[2].mkdir()
    remove_checkpoints(root)
    assert not any(d.exists() for d in made)
    assert all(k.exists() for k in kept)
