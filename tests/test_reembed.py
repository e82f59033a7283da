"""``WorldDB.reembed`` / ``worlddb reembed``: a new model for every vector, in one transaction."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from worlddb_lite import EmbedderError, EmbedderMismatch, WorldDB
from worlddb_lite.cli import main
from worlddb_lite.index import vector_index
from worlddb_lite.models.embed import bundled_model_path
from worlddb_lite.store import vector_codes

from .conftest import FakeClock, FakeEmbedder, table_digest


class OtherEmbedder(FakeEmbedder):
    """A different 'model': 16 dimensions, its own id, and it can be told to fail."""

    model_id = "other-16"
    dim = 16

    def __init__(self, fail_after: int | None = None) -> None:
        super().__init__()
        self.fail_after = fail_after
        self.texts = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.texts += len(texts)
        if self.fail_after is not None and self.texts > self.fail_after:
            raise EmbedderError("the other model crashed")
        return super().embed(texts)[:, :16] + np.float32(1e-3)


def _store(path: Path) -> list[str]:
    with WorldDB(path, embedder=FakeEmbedder(), clock=FakeClock()) as db:
        session = db.write("a session in Porto", scope="alice", type="Session")
        ids = db.write_many([{"text": f"turn {i} about the river", "world": session} for i in range(30)])
        return [session, *ids]


def test_reembed_replaces_every_vector_keeps_every_root_and_switches_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:

    monkeypatch.setattr(vector_index, "TRAIN_AT", 20)  # the new vectors get partitions trained once, at the end
    path = tmp_path / "m.db"
    ids = _store(path)
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        root_before = db.root()
    seen: list[tuple[int, int]] = []
    result = WorldDB.reembed(path, embedder=OtherEmbedder(), progress=lambda d, t: seen.append((d, t)), batch=8)
    assert result["embedder"] == "other-16" and result["dim"] == 16 and result["texts"] == 32  # + scope + session
    assert seen[-1] == (32, 32) and len(seen) == 4
    with pytest.raises(EmbedderMismatch):
        WorldDB(path, embedder=FakeEmbedder())
    with WorldDB(path, embedder=OtherEmbedder()) as db:
        assert db.root() == root_before  # vectors are an index, not content
        assert db.sql("select count(distinct part) from node_vec")[0][0] > 1
        assert db.verify(deep=True).ok
        leaf = db.sql(
            "select embedding, scale from node_vec where rowid = (select nid from node where id = ?)",
            (bytes.fromhex(ids[1]),),
        )[0]
        expected = OtherEmbedder().embed(["turn 0 about the river"])[0]
        assert np.allclose(vector_codes.row(*leaf), expected / np.linalg.norm(expected), atol=4e-3)
        assert db.nearest("turn 0 about the river", k=1)[0][0].id in ids


def test_an_interrupted_reembed_leaves_the_old_model_and_vectors(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    _store(path)
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        before = table_digest(db)
    with pytest.raises(EmbedderError, match="crashed"):
        WorldDB.reembed(path, embedder=OtherEmbedder(fail_after=20), batch=8)
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        assert table_digest(db) == before
        assert db.verify(deep=True).ok


def test_the_cli_reembeds_with_a_model_folder_and_the_store_then_needs_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "cli.db")
    folder = tmp_path / "my-model"
    shutil.copytree(bundled_model_path(), folder)
    assert main(["write", path, "I moved to Porto in May", "--scope", "me"]) == 0
    assert main(["reembed", path, "--model", str(folder)]) == 0
    assert "re-embedding" in capsys.readouterr().err
    assert main(["search", path, "Porto"]) == 2
    assert "embedded with 'model2vec:my-model@" in capsys.readouterr().err
    assert main(["verify", path, "--deep", "--model", str(folder)]) == 0


def test_a_store_re_embedded_by_another_process_refuses_the_stale_handle(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    _store(path)
    stale = WorldDB(path, embedder=FakeEmbedder())
    try:
        assert stale.nearest("turn 3 about the river", k=1)
        WorldDB.reembed(path, embedder=OtherEmbedder())
        with pytest.raises(EmbedderMismatch, match="re-embedded with 'other-16'"):
            stale.nearest("turn 3 about the river", k=1)
        before = (path.stat().st_size, stale.stats()["vectors"])
        with pytest.raises(EmbedderMismatch, match="reopen it"):
            stale.write("written with the old model", scope="alice")
        assert stale.stats()["vectors"] == before[1]
    finally:
        stale.close()


def test_a_store_made_with_mean_composition_is_re_embedded_with_it(tmp_path: Path) -> None:
    """Review of issue 39: re-embedding recomposed every world with the default pooling, whatever the store's."""
    path = tmp_path / "mean.db"
    with WorldDB(path, embedder=FakeEmbedder(), compose="mean", clock=FakeClock()) as db:
        session = db.write("a session in Porto", scope="alice", type="Session")
        db.write_many([{"text": f"turn {i} about the river", "world": session} for i in range(5)])
    WorldDB.reembed(path, embedder=OtherEmbedder())
    with WorldDB(path, embedder=OtherEmbedder()) as db:
        assert db.compose == "mean"
        assert not db.verify(deep=True).violations  # the worlds' vectors are their members' mean again
