"""Workspace names and folders (``store.workspaces``): a name never reaches outside its root."""

from __future__ import annotations

from pathlib import Path

import pytest

from store.workspaces import (
    WorkspaceNameError,
    check_name,
    conversation_files,
    ensure_workspace,
    files_of,
    folder_key,
    group_files,
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


@pytest.mark.parametrize("key", ["..", ".", ".hidden", "a..b", "ann"])
def test_owner_and_group_folders_stay_one_level_under_their_root(tmp_path: Path, key: str) -> None:
    folder = conversation_files(tmp_path, "default", key)
    assert folder.parent == workspace_path(tmp_path, "default")
    assert folder.name not in (".", "..") and "/" not in folder.name
    assert folder_key(key) == key or folder_key(key).startswith("~")
    group = group_files(tmp_path, key)
    assert group.parent == tmp_path / "group-workspaces" and group.name == folder_key(key)


def test_a_record_names_its_files(tmp_path: Path) -> None:
    from store.base import Group
    from store.conversation import ConversationInfo, GroupKind

    assert files_of(tmp_path, Group(id="grp_1", name="g")) == tmp_path / "group-workspaces/grp_1"
    conv = Group(
        id="conv_1",
        name="c",
        kind=GroupKind.CONVERSATION,
        conversation=ConversationInfo(owner="ann", vp_id="omni", work_dir="proj"),
    )
    assert files_of(tmp_path, conv) == tmp_path / "workspaces/proj/ann"
