"""Pod volumes on the local runtime (phalanx.node.volumes): configMap and emptyDir
rooted at $(PHALANX_ROOT), validated as the apiserver does."""
from __future__ import annotations

import base64
import os
import stat
from datetime import datetime, timezone
from pathlib import Path

import pytest

from phalanx.node.volumes import (
    DATA_LINK,
    ConfigMapVolume,
    EmptyDirVolume,
    KeyToPath,
    MountError,
    VolumeSpecError,
    config_map_files,
    materialise,
    plan_volumes,
    refresh_config_maps,
    root_dir,
    volume_dir,
)

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc)


def pod(volumes: list | None, mounts: list | None = None, *, more: list | None = None, init: list | None = None):
    spec: dict = {"containers": [{"name": "main", "command": ["true"], "volumeMounts": mounts}]}
    if more:
        spec["containers"] += more
    if init:
        spec["initContainers"] = init
    if volumes is not None:
        spec["volumes"] = volumes
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "u1"}, "spec": spec}


def cm_vol(name="mpi", cm="job-config", **kw):
    return {"name": name, "configMap": {"name": cm, **kw}}


def config_map(data=None, binary=None, rv="7"):
    obj = {"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "job-config", "namespace": "ns", "resourceVersion": rv}, "data": data or {}}
    if binary:
        obj["binaryData"] = binary
    return obj


def visible(d: Path) -> list[str]:
    return sorted(n for n in os.listdir(d) if not n.startswith("."))


def mode_of(p: Path) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


# ------------------------------------------------------------------ plan (pure)


def test_plan_keeps_only_mounted_configmap_and_emptydir_volumes():
    p = pod([cm_vol(), {"name": "scratch", "emptyDir": {}}, {"name": "host", "hostPath": {"path": "/data"}},
             {"name": "unused", "emptyDir": {}}],
            [{"name": "mpi", "mountPath": "/etc/mpi"}, {"name": "scratch", "mountPath": "/opt/kube/"},
             {"name": "host", "mountPath": "relative/ignored"}])
    plan = plan_volumes(p)
    assert [v.name for v in plan.volumes] == ["mpi", "scratch"]
    assert plan.volumes[0] == ConfigMapVolume("mpi", "job-config", None, 0o644, False)
    assert plan.volumes[1] == EmptyDirVolume("scratch")
    assert [(m.volume, m.mount_path) for m in plan.mounts] == [("mpi", "/etc/mpi"), ("scratch", "/opt/kube")]
    assert plan.config_maps == ["job-config"]


def test_plan_of_a_pod_without_volumes_is_empty():
    assert not plan_volumes(pod(None))
    assert plan_volumes(pod(None)).mounts == ()


def test_plan_reads_items_modes_and_optional():
    p = pod([cm_vol(items=[{"key": "kubexec.sh", "path": "kubexec.sh", "mode": 0o555},
                           {"key": "hostfile", "path": "sub/hosts"}], defaultMode=0o444, optional=True)],
            [{"name": "mpi", "mountPath": "/etc/mpi"}])
    vol = plan_volumes(p).volumes[0]
    assert vol.items == (KeyToPath("kubexec.sh", "kubexec.sh", 0o555), KeyToPath("hostfile", "sub/hosts", None))
    assert vol.default_mode == 0o444 and vol.optional


@pytest.mark.parametrize("mount_path,rule", [
    ("etc/mpi", "must be an absolute path"),
    ("/etc/../mpi", "must not contain '..'"),
    ("/", "cannot mount over the whole root"),
    ("//.//", "cannot mount over the whole root"),
    ("", "Required value"),
    (None, "Required value"),
    (5, "Required value"),
])
def test_bad_mount_paths_are_refused_with_field_and_rule(mount_path, rule):
    with pytest.raises(VolumeSpecError) as e:
        plan_volumes(pod([cm_vol()], [{"name": "mpi", "mountPath": mount_path}]))
    assert "spec.containers[0].volumeMounts[0].mountPath" in str(e.value) and rule in str(e.value)


@pytest.mark.parametrize("item,field,rule", [
    ({"key": "a", "path": "../x"}, "items[0].path", "must not contain '..'"),
    ({"key": "a", "path": "x/../../y"}, "items[0].path", "must not contain '..'"),
    ({"key": "a", "path": "/abs"}, "items[0].path", "must be a relative path"),
    ({"key": "a", "path": "..data"}, "items[0].path", "must not start with '..'"),
    ({"key": "a", "path": ""}, "items[0].path", "Required value"),
    ({"key": "a", "path": "./"}, "items[0].path", "must name a file"),
    ({"key": "../a", "path": "a"}, "items[0].key", "a valid config key"),
    ({"key": "..", "path": "a"}, "items[0].key", "a valid config key"),
    ({"path": "a"}, "items[0].key", "Required value"),
    ({"key": "a", "path": "a", "mode": 0o1000}, "items[0].mode", "between 0 and 0777"),
    ({"key": "a", "path": "a", "mode": -1}, "items[0].mode", "between 0 and 0777"),
    ({"key": "a", "path": "a", "mode": True}, "items[0].mode", "between 0 and 0777"),
    ({"key": "a", "path": "a", "mode": "0644"}, "items[0].mode", "between 0 and 0777"),
])
def test_bad_items_are_refused_as_the_apiserver_does(item, field, rule):
    with pytest.raises(VolumeSpecError) as e:
        plan_volumes(pod([cm_vol(items=[item])], [{"name": "mpi", "mountPath": "/etc/mpi"}]))
    assert f"spec.volumes[0].configMap.{field}" in str(e.value) and rule in str(e.value)


@pytest.mark.parametrize("volumes,mounts,needle", [
    ([cm_vol(defaultMode=0o1777)], [{"name": "mpi", "mountPath": "/m"}], "spec.volumes[0].configMap.defaultMode"),
    ([cm_vol(cm="Bad_Name")], [{"name": "mpi", "mountPath": "/m"}], "spec.volumes[0].configMap.name"),
    ([cm_vol(optional="yes")], [{"name": "mpi", "mountPath": "/m"}], "spec.volumes[0].configMap.optional"),
    ([cm_vol(items="a")], [{"name": "mpi", "mountPath": "/m"}], "spec.volumes[0].configMap.items: must be a list"),
    ([{"name": "Bad", "emptyDir": {}}], [], "spec.volumes[0].name"),
    ([cm_vol(), cm_vol()], [], 'spec.volumes[1].name: Duplicate value: "mpi"'),
    ([{"name": "x", "emptyDir": {}, "configMap": {"name": "c"}}], [], "may not specify more than 1 volume type"),
    ([{"name": "x", "emptyDir": "yes"}], [{"name": "x", "mountPath": "/m"}], "spec.volumes[0].emptyDir"),
    ("nope", [], "spec.volumes: must be a list"),
    (["nope"], [], "spec.volumes[0]: must be an object"),
    ([cm_vol()], [{"name": "other", "mountPath": "/m"}], 'volumeMounts[0].name: Not found: "other"'),
    ([cm_vol()], [{"mountPath": "/m"}], "volumeMounts[0].name: Required value"),
    ([cm_vol()], ["x"], "volumeMounts[0]: must be an object"),
    ([cm_vol()], "x", "volumeMounts: must be a list"),
    ([cm_vol()], [{"name": "mpi", "mountPath": "/m", "subPath": "../x"}], "volumeMounts[0].subPath"),
    ([cm_vol()], [{"name": "mpi", "mountPath": "/m", "subPath": "/x"}], "volumeMounts[0].subPath"),
    ([cm_vol()], [{"name": "mpi", "mountPath": "/m", "subPathExpr": "$(POD)"}], "subPathExpr: Unsupported"),
    ([cm_vol(), {"name": "e", "emptyDir": {}}],
     [{"name": "mpi", "mountPath": "/m"}, {"name": "e", "mountPath": "/m/"}], "must be unique"),
    ([cm_vol(), {"name": "e", "emptyDir": {}}],
     [{"name": "e", "mountPath": "/opt"}, {"name": "mpi", "mountPath": "/opt/mpi"}], 'nested inside the mount "/opt"'),
])
def test_invalid_volume_specs_name_the_field(volumes, mounts, needle):
    with pytest.raises(VolumeSpecError) as e:
        plan_volumes(pod(volumes, mounts))
    assert needle in str(e.value)


def test_two_containers_may_share_a_mount_but_not_a_path_with_different_content():
    vols = [cm_vol(), {"name": "e", "emptyDir": {}}]
    same = pod(vols, [{"name": "e", "mountPath": "/data"}],
               init=[{"name": "init", "volumeMounts": [{"name": "e", "mountPath": "/data"}]}])
    assert [m.mount_path for m in plan_volumes(same).mounts] == ["/data"]
    clash = pod(vols, [{"name": "e", "mountPath": "/data"}],
                more=[{"name": "side", "volumeMounts": [{"name": "mpi", "mountPath": "/data"}]}])
    with pytest.raises(VolumeSpecError) as e:
        plan_volumes(clash)
    assert "spec.containers[1].volumeMounts[0].mountPath" in str(e.value) and "share one root" in str(e.value)


# ------------------------------------------------------------------ configMap files (pure)


def test_configmap_files_all_keys_with_default_mode_and_binary_data():
    vol = ConfigMapVolume("mpi", "job-config", default_mode=0o440)
    files = config_map_files(vol, config_map({"hostfile": "w-0 slots=1\n"}, {"blob": base64.b64encode(b"\0\1").decode()}))
    assert files == {"hostfile": (b"w-0 slots=1\n", 0o440), "blob": (b"\0\1", 0o440)}


def test_configmap_items_select_rename_and_set_modes():
    vol = ConfigMapVolume("mpi", "job-config", (KeyToPath("kubexec.sh", "kubexec.sh", 0o555),
                                                KeyToPath("hostfile", "conf/hosts")))
    files = config_map_files(vol, config_map({"kubexec.sh": "#!/bin/sh\n", "hostfile": "h\n", "other": "x"}))
    assert files == {"kubexec.sh": (b"#!/bin/sh\n", 0o555), "conf/hosts": (b"h\n", 0o644)}


def test_missing_configmap_is_a_mount_error_unless_optional():
    err = config_map_files(ConfigMapVolume("mpi", "job-config"), None)
    assert err == MountError("mpi", 'configmap "job-config" not found')
    assert err.event_message == 'MountVolume.SetUp failed for volume "mpi" : configmap "job-config" not found'
    assert config_map_files(ConfigMapVolume("mpi", "job-config", optional=True), None) == {}


def test_missing_item_key_is_a_mount_error_unless_optional():
    items = (KeyToPath("nope", "nope"), KeyToPath("a", "a"))
    err = config_map_files(ConfigMapVolume("mpi", "c", items), config_map({"a": "1"}))
    assert isinstance(err, MountError) and err.message == "configmap references non-existent config key: nope"
    assert config_map_files(ConfigMapVolume("mpi", "c", items, optional=True), config_map({"a": "1"})) == \
        {"a": (b"1", 0o644)}


def test_configmap_with_a_key_that_would_escape_is_a_mount_error():
    err = config_map_files(ConfigMapVolume("mpi", "c"), config_map({"../../x": "evil"}))
    assert isinstance(err, MountError) and "invalid key" in err.message


# ------------------------------------------------------------------ materialise (files)


def mpi_plan(**kw):
    return plan_volumes(pod([cm_vol(items=[{"key": "kubexec.sh", "path": "kubexec.sh", "mode": 0o555},
                                           {"key": "hostfile", "path": "hostfile", "mode": 0o444}], **kw),
                             {"name": "kube", "emptyDir": {}}],
                            [{"name": "mpi", "mountPath": "/etc/mpi"}, {"name": "kube", "mountPath": "/opt/kube"}]))


def test_configmap_keys_become_files_with_their_modes_under_the_root(tmp_path):
    cm = config_map({"kubexec.sh": "#!/bin/sh\necho hi\n", "hostfile": "w-0 slots=2\n"})
    assert materialise(tmp_path, mpi_plan(), {"job-config": cm}, NOW) == []
    root = root_dir(tmp_path)
    assert (root / "etc/mpi/hostfile").read_text() == "w-0 slots=2\n"
    assert mode_of(root / "etc/mpi/hostfile") == 0o444
    assert mode_of(root / "etc/mpi/kubexec.sh") == 0o555
    assert visible(root / "etc/mpi") == ["hostfile", "kubexec.sh"]
    assert (root / "etc/mpi" / DATA_LINK).is_symlink() and (root / "etc/mpi/hostfile").is_symlink()
    assert (root / "opt/kube").is_dir()
    # the mount resolves inside the pod directory
    assert (root / "etc/mpi").resolve() == volume_dir(tmp_path, "mpi").resolve()


def test_emptydir_is_shared_and_survives_materialising_again(tmp_path):
    plan = plan_volumes(pod([{"name": "e", "emptyDir": {}}], [{"name": "e", "mountPath": "/a"}],
                            more=[{"name": "b", "volumeMounts": [{"name": "e", "mountPath": "/b"}]}]))
    assert materialise(tmp_path, plan, {}, NOW) == []
    root = root_dir(tmp_path)
    (root / "a" / "f").write_text("x")
    assert (root / "b" / "f").read_text() == "x"
    assert materialise(tmp_path, plan, {}, NOW) == []  # an agent restart: content kept
    assert (root / "b" / "f").read_text() == "x"


def test_subpath_mounts_a_single_key_and_an_emptydir_subdirectory(tmp_path):
    plan = plan_volumes(pod([cm_vol(), {"name": "e", "emptyDir": {}}],
                            [{"name": "mpi", "mountPath": "/etc/app/hosts", "subPath": "hostfile"},
                             {"name": "e", "mountPath": "/work", "subPath": "w/1"}]))
    assert materialise(tmp_path, plan, {"job-config": config_map({"hostfile": "h", "other": "o"})}, NOW) == []
    root = root_dir(tmp_path)
    assert (root / "etc/app/hosts").read_text() == "h"
    assert not (root / "etc/app/other").exists()
    assert (root / "work").is_dir() and (volume_dir(tmp_path, "e") / "w/1").is_dir()


def test_missing_configmap_leaves_its_mount_out_and_says_why(tmp_path):
    errors = materialise(tmp_path, mpi_plan(), {"job-config": None}, NOW)
    assert errors == [MountError("mpi", 'configmap "job-config" not found')]
    root = root_dir(tmp_path)
    assert not os.path.lexists(root / "etc/mpi")
    assert (root / "opt/kube").is_dir()  # the other volume is set up


def test_optional_missing_configmap_mounts_an_empty_directory(tmp_path):
    assert materialise(tmp_path, mpi_plan(optional=True), {"job-config": None}, NOW) == []
    assert (root_dir(tmp_path) / "etc/mpi").is_dir() and visible(root_dir(tmp_path) / "etc/mpi") == []


def test_configmap_update_is_atomic_and_drops_removed_keys(tmp_path):
    plan = plan_volumes(pod([cm_vol()], [{"name": "mpi", "mountPath": "/etc/mpi"}]))
    assert materialise(tmp_path, plan, {"job-config": config_map({"a": "1", "b": "2"})}, NOW) == []
    vdir = volume_dir(tmp_path, "mpi")
    first = os.readlink(vdir / DATA_LINK)
    # unchanged content: nothing rewritten
    assert refresh_config_maps(tmp_path, plan, {"job-config": config_map({"a": "1", "b": "2"}, rv="8")}, NOW) == []
    assert os.readlink(vdir / DATA_LINK) == first
    assert refresh_config_maps(tmp_path, plan, {"job-config": config_map({"a": "10", "c": "3"}, rv="9")}, NOW) == ["mpi"]
    root = root_dir(tmp_path)
    assert (root / "etc/mpi/a").read_text() == "10" and (root / "etc/mpi/c").read_text() == "3"
    assert not os.path.lexists(root / "etc/mpi/b")
    assert not (vdir / first).exists()  # the old payload is gone
    assert sorted(n for n in os.listdir(vdir) if n.startswith("..") and n != DATA_LINK) == \
        [os.readlink(vdir / DATA_LINK)]


def test_refresh_keeps_the_content_when_the_configmap_is_gone(tmp_path):
    plan = plan_volumes(pod([cm_vol()], [{"name": "mpi", "mountPath": "/etc/mpi"}]))
    materialise(tmp_path, plan, {"job-config": config_map({"a": "1"})}, NOW)
    assert refresh_config_maps(tmp_path, plan, {"job-config": None}, NOW) == []
    assert (root_dir(tmp_path) / "etc/mpi/a").read_text() == "1"


def test_a_mount_never_follows_a_symlink_out_of_the_root(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    pdir = tmp_path / "pod"
    root_dir(pdir).mkdir(parents=True)
    os.symlink(outside, root_dir(pdir) / "etc")
    errors = materialise(pdir, mpi_plan(), {"job-config": config_map({"kubexec.sh": "", "hostfile": ""})}, NOW)
    assert [e.volume for e in errors] == ["mpi"] and "not a directory" in errors[0].message
    assert os.listdir(outside) == []


def test_a_non_empty_directory_where_a_mount_goes_is_an_error_an_empty_one_is_replaced(tmp_path):
    root = root_dir(tmp_path)
    (root / "opt/kube").mkdir(parents=True)
    (root / "etc/mpi").mkdir(parents=True)
    (root / "etc/mpi/keep").write_text("x")
    errors = materialise(tmp_path, mpi_plan(), {"job-config": config_map({"kubexec.sh": "", "hostfile": ""})}, NOW)
    assert [e.volume for e in errors] == ["mpi"] and "not empty" in errors[0].message
    assert (root / "opt/kube").is_symlink()
