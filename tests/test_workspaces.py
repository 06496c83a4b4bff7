"""Workspace names and folders (``store.workspaces``): a name never reaches outside its root."""

from __future__ import annotations

from pathlib import Path

import pytest

from store.workspaces import (
    WorkspaceNameError,
    check_name,
    ensure_workspace,
    list_workspaces,
    workspace_path,
    workspaces_root,
)


@pytest.mark.parametrize("name", ["default", "proj-1", "a.b_c", "数据", "X"])
def test_plain_names_are_folders_under_the_root(tmp_path: Path, name: str) -> None:
    assert check_name(name) == name
    path = workspace_path(tmp_path, name)
    assert path.parent == workspaces_root(tmp_path) == tmp_path / "workspaces"


@pytest.mark.parametrize(
    "name",
    ["", "..", "../x", "a/../b", "a/b", "/abs", "a\\b", ".hidden", "_x", "-x", "a..b", "x" * 65],
)
def test_paths_and_odd_names_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(WorkspaceNameError):
        check_name(name)
    with pytest.raises(WorkspaceNameError):
        ensure_workspace(tmp_path, name)
    assert not (tmp_path / "x").exists()


def test_listing_shows_folders_made_and_skips_what_is_not_a_workspace(tmp_path: Path) -> None:
    assert list_workspaces(tmp_path) == []
    ensure_workspace(tmp_path, "beta")
    ensure_workspace(tmp_path, "alpha")
    ensure_workspace(tmp_path, "alpha")  # again: harmless
    root = workspaces_root(tmp_path)
    (root / "notes.txt").write_text("a file, not a workspace")
    (root / ".cache").mkdir()
    (root / "link").symlink_to(tmp_path)
    assert [w.name for w in list_workspaces(tmp_path)] == ["alpha", "beta"]
    assert all(w.path.parent == root for w in list_workspaces(tmp_path))
