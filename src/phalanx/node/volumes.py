"""Pod volumes on the local runtime: configMap and emptyDir, rooted at ``$(PHALANX_ROOT)``.

A process has no mount namespace of its own here, so a volumeMount's
``mountPath`` is taken relative to the pod's root directory (the container's
``PHALANX_ROOT``): ``/etc/mpi`` is ``<pod dir>/.root/etc/mpi``. Layout:

- ``<pod dir>/.root/``: ``PHALANX_ROOT``, shared by the pod's containers;
- ``<pod dir>/.volumes/<volume>/``: a volume's content. emptyDir: a plain
  directory (kept across container restarts). configMap: written as the
  kubelet's atomic writer does, a ``..data`` symlink swapped to a new
  timestamped directory, each top-level key a symlink into ``..data``, so a
  reader never sees half an update;
- a mount is a symlink ``root/<mountPath>`` -> ``.volumes/<volume>[/<subPath>]``.

Other volume types (hostPath, secret, persistentVolumeClaim, ...) are not
materialised: their mounts are skipped, as the runtime always did. Unlike the
kubelet, one pod shares one root, so two containers may not mount different
things at the same path, mounts may not nest, and ``readOnly`` is not enforced.
"""
from __future__ import annotations

import base64
import errno
import os
import re
import secrets
import shutil
import stat
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any, Mapping, Union

from phalanx.objects.names import is_dns_label, is_dns_subdomain

Obj = dict[str, Any]

ROOT_ENV = "PHALANX_ROOT"
ROOT_DIR = ".root"  # hidden: a container (a DNS label) can never be named so
VOLUMES_DIR = ".volumes"
DATA_LINK = "..data"
DEFAULT_MODE = 0o644
MAX_MODE = 0o777
_CONFIG_MAP_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_KEY_MAX = 253


class VolumeSpecError(ValueError):
    """The pod's volumes or mounts are invalid; the message names the field and the rule."""


@dataclass(frozen=True)
class MountError:
    """A volume that cannot be set up now (retried later), in the kubelet's words."""

    volume: str
    message: str

    @property
    def event_message(self) -> str:
        return f'MountVolume.SetUp failed for volume "{self.volume}" : {self.message}'


@dataclass(frozen=True)
class KeyToPath:
    key: str
    path: str
    mode: int | None = None


@dataclass(frozen=True)
class ConfigMapVolume:
    name: str
    config_map: str
    items: tuple[KeyToPath, ...] | None = None
    default_mode: int = DEFAULT_MODE
    optional: bool = False


@dataclass(frozen=True)
class EmptyDirVolume:
    name: str


Volume = Union[ConfigMapVolume, EmptyDirVolume]


@dataclass(frozen=True)
class Mount:
    volume: str
    mount_path: str  # normalised, absolute, never "/"
    sub_path: str = ""

    @property
    def relative(self) -> PurePosixPath:
        return PurePosixPath(self.mount_path).relative_to("/")


@dataclass(frozen=True)
class VolumePlan:
    """The supported volumes that some container mounts, and where."""

    volumes: tuple[Volume, ...] = ()
    mounts: tuple[Mount, ...] = ()

    @property
    def config_maps(self) -> list[str]:
        return sorted({v.config_map for v in self.volumes if isinstance(v, ConfigMapVolume)})

    def __bool__(self) -> bool:
        return bool(self.volumes)


# --------------------------------------------------------------------------- validation (pure)


def check_relative_path(path: Any, field: str, *, reserved: bool = True) -> str:
    """A path inside a volume, as the apiserver checks it: not absolute, no
    ``..`` element, and (``reserved``) not starting with ``..``."""
    if not isinstance(path, str) or not path:
        raise VolumeSpecError(f"{field}: Required value")
    if path.startswith("/"):
        raise VolumeSpecError(f'{field}: Invalid value: "{path}": must be a relative path')
    if ".." in path.split("/"):
        raise VolumeSpecError(f"{field}: Invalid value: \"{path}\": must not contain '..'")
    if reserved and path.startswith(".."):
        raise VolumeSpecError(f"{field}: Invalid value: \"{path}\": must not start with '..'")
    if "\x00" in path:
        raise VolumeSpecError(f'{field}: Invalid value: {path!r}: must not contain NUL')
    if reserved and not _normal(path):
        raise VolumeSpecError(f'{field}: Invalid value: "{path}": must name a file')
    return path


def check_mount_path(path: Any, field: str) -> str:
    """An absolute mount path without ``..``; returned normalised (no ``//``, ``.``, trailing ``/``)."""
    if not isinstance(path, str) or not path:
        raise VolumeSpecError(f"{field}: Required value")
    if not path.startswith("/"):
        raise VolumeSpecError(f'{field}: Invalid value: "{path}": must be an absolute path '
                              "(the local runtime roots it at $(PHALANX_ROOT))")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise VolumeSpecError(f"{field}: Invalid value: \"{path}\": must not contain '..'")
    if "\x00" in path:
        raise VolumeSpecError(f"{field}: Invalid value: {path!r}: must not contain NUL")
    if not parts:
        raise VolumeSpecError(f'{field}: Invalid value: "{path}": the local runtime cannot mount over the '
                              "whole root $(PHALANX_ROOT)")
    return "/" + "/".join(parts)


def check_config_map_key(key: Any, field: str) -> str:
    if not isinstance(key, str) or not key:
        raise VolumeSpecError(f"{field}: Required value")
    if len(key) > _KEY_MAX or not _CONFIG_MAP_KEY.match(key) or key in (".", "..") or key.startswith(".."):
        raise VolumeSpecError(f'{field}: Invalid value: "{key}": a valid config key must consist of alphanumeric '
                              "characters, '-', '_' or '.', and must not be '.' or start with '..'")
    return key


def _mode(v: Any, field: str) -> int | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_MODE:
        raise VolumeSpecError(f"{field}: Invalid value: {v!r}: must be a number between 0 and 0777 (octal), "
                              "both inclusive")
    return v


def _config_map_volume(name: str, src: Any, field: str) -> ConfigMapVolume:
    if not isinstance(src, dict):
        raise VolumeSpecError(f"{field}: must be an object")
    cm = src.get("name")
    if not isinstance(cm, str) or not is_dns_subdomain(cm):
        raise VolumeSpecError(f"{field}.name: Invalid value: {cm!r}: must be the name of a ConfigMap "
                              "(a lowercase RFC 1123 subdomain)")
    items: tuple[KeyToPath, ...] | None = None
    if src.get("items") is not None:
        raw = src["items"]
        if not isinstance(raw, list):
            raise VolumeSpecError(f"{field}.items: must be a list")
        out = []
        for i, it in enumerate(raw):
            ipath = f"{field}.items[{i}]"
            if not isinstance(it, dict):
                raise VolumeSpecError(f"{ipath}: must be an object")
            out.append(KeyToPath(check_config_map_key(it.get("key"), f"{ipath}.key"),
                                 check_relative_path(it.get("path"), f"{ipath}.path"),
                                 _mode(it.get("mode"), f"{ipath}.mode")))
        items = tuple(out)
    default = _mode(src.get("defaultMode"), f"{field}.defaultMode")
    optional = src.get("optional")
    if optional is not None and not isinstance(optional, bool):
        raise VolumeSpecError(f"{field}.optional: Invalid value: {optional!r}: must be a boolean")
    return ConfigMapVolume(name, cm, items, DEFAULT_MODE if default is None else default, bool(optional))


def plan_volumes(pod: Obj) -> VolumePlan:
    """The configMap and emptyDir volumes the pod's containers mount, and the
    mounts; VolumeSpecError (field and rule) for what the apiserver or this
    runtime refuses. Pure."""
    spec = pod.get("spec") or {}
    raw_volumes = spec.get("volumes") or []
    if not isinstance(raw_volumes, list):
        raise VolumeSpecError("spec.volumes: must be a list")
    declared: dict[str, Volume | None] = {}  # None: a type this runtime does not materialise
    for i, v in enumerate(raw_volumes):
        field = f"spec.volumes[{i}]"
        if not isinstance(v, dict):
            raise VolumeSpecError(f"{field}: must be an object")
        name = v.get("name")
        if not isinstance(name, str) or not is_dns_label(name):
            raise VolumeSpecError(f"{field}.name: Invalid value: {name!r}: a lowercase RFC 1123 label must consist "
                                  "of lower case alphanumeric characters or '-', start and end with an "
                                  "alphanumeric character, and be at most 63 characters")
        if name in declared:
            raise VolumeSpecError(f'{field}.name: Duplicate value: "{name}"')
        sources = [k for k in ("configMap", "emptyDir") if v.get(k) is not None]
        if len(sources) > 1:
            raise VolumeSpecError(f"{field}.{sources[1]}: Forbidden: may not specify more than 1 volume type")
        if sources == ["configMap"]:
            declared[name] = _config_map_volume(name, v["configMap"], f"{field}.configMap")
        elif sources == ["emptyDir"]:
            if not isinstance(v["emptyDir"], dict):
                raise VolumeSpecError(f"{field}.emptyDir: must be an object")
            declared[name] = EmptyDirVolume(name)
        else:
            declared[name] = None

    by_path: dict[str, tuple[Mount, str]] = {}
    used: dict[str, Volume] = {}
    for kind in ("initContainers", "containers"):
        containers = spec.get(kind) or []
        if not isinstance(containers, list):
            continue
        for ci, c in enumerate(containers):
            mounts = c.get("volumeMounts") if isinstance(c, dict) else None
            if mounts is None:
                continue
            cfield = f"spec.{kind}[{ci}].volumeMounts"
            if not isinstance(mounts, list):
                raise VolumeSpecError(f"{cfield}: must be a list")
            mine: set[str] = set()
            for mi, m in enumerate(mounts):
                field = f"{cfield}[{mi}]"
                if not isinstance(m, dict):
                    raise VolumeSpecError(f"{field}: must be an object")
                vname = m.get("name")
                if not isinstance(vname, str) or not vname:
                    raise VolumeSpecError(f"{field}.name: Required value")
                if vname not in declared:
                    raise VolumeSpecError(f'{field}.name: Not found: "{vname}"')
                vol = declared[vname]
                if vol is None:
                    continue  # not materialised by the local runtime
                path = check_mount_path(m.get("mountPath"), f"{field}.mountPath")
                if path in mine:
                    raise VolumeSpecError(f'{field}.mountPath: Invalid value: "{path}": must be unique')
                mine.add(path)
                if m.get("subPathExpr"):
                    raise VolumeSpecError(f"{field}.subPathExpr: Unsupported value: the local runtime supports "
                                          "subPath only")
                sub = m.get("subPath") or ""
                if sub:
                    sub = check_relative_path(sub, f"{field}.subPath", reserved=False)
                    sub = "/".join(p for p in sub.split("/") if p not in ("", "."))
                mount = Mount(vname, path, sub)
                seen = by_path.get(path)
                if seen is not None and seen[0] != mount:
                    raise VolumeSpecError(f'{field}.mountPath: Invalid value: "{path}": already mounted from '
                                          f'volume "{seen[0].volume}" at {seen[1]}: the containers of a pod share '
                                          "one root on the local runtime")
                by_path.setdefault(path, (mount, field))
                used[vname] = vol
    paths = sorted(by_path)
    for a, b in zip(paths, paths[1:]):
        if b.startswith(a + "/"):
            raise VolumeSpecError(f'{by_path[b][1]}.mountPath: Invalid value: "{b}": nested inside the mount "{a}": '
                                  "the local runtime cannot nest mounts")
    volumes = tuple(used[n] for n in declared if n in used)
    return VolumePlan(volumes, tuple(by_path[p][0] for p in paths))


def config_map_files(vol: ConfigMapVolume, cm: Obj | None) -> dict[str, tuple[bytes, int]] | MountError:
    """The files (relative path -> content, mode) of a configMap volume, or
    why it cannot be set up. ``cm`` is the ConfigMap, None when it does not exist. Pure."""
    if cm is None:
        if vol.optional:
            return {}
        return MountError(vol.name, f'configmap "{vol.config_map}" not found')
    data: dict[str, bytes] = {}
    for k, v in ((cm.get("binaryData") or {}) if isinstance(cm.get("binaryData"), dict) else {}).items():
        try:
            data[str(k)] = base64.b64decode(str(v), validate=True)
        except ValueError:
            return MountError(vol.name, f'configmap "{vol.config_map}": binaryData[{k}]: invalid base64')
    for k, v in ((cm.get("data") or {}) if isinstance(cm.get("data"), dict) else {}).items():
        data[str(k)] = ("" if v is None else str(v)).encode()
    out: dict[str, tuple[bytes, int]] = {}
    if vol.items is None:
        for key in sorted(data):
            try:
                check_config_map_key(key, "key")
            except VolumeSpecError:
                return MountError(vol.name, f'configmap "{vol.config_map}": invalid key "{key}"')
            out[key] = (data[key], vol.default_mode)
        return out
    for it in vol.items:
        if it.key not in data:
            if vol.optional:
                continue
            return MountError(vol.name, f"configmap references non-existent config key: {it.key}")
        out[_normal(it.path)] = (data[it.key], vol.default_mode if it.mode is None else it.mode)
    return out


def _normal(rel: str) -> str:
    return "/".join(p for p in rel.split("/") if p not in ("", "."))


# --------------------------------------------------------------------------- on disk


def root_dir(pod_directory: Path) -> Path:
    """``PHALANX_ROOT`` of the pod's containers."""
    return Path(pod_directory) / ROOT_DIR


def volume_dir(pod_directory: Path, volume: str) -> Path:
    return Path(pod_directory) / VOLUMES_DIR / volume


def materialise(pod_directory: Path, plan: VolumePlan, config_maps: Mapping[str, Obj | None],
                now: datetime) -> list[MountError]:
    """Set up every volume of the plan and its mounts; the volumes that could
    not be (their mounts are left out). Idempotent: an emptyDir keeps its
    content, a configMap volume is rewritten only when its content changed."""
    errors: list[MountError] = []
    ok: set[str] = set()
    root = root_dir(pod_directory)
    root.mkdir(parents=True, exist_ok=True)
    for vol in plan.volumes:
        vdir = volume_dir(pod_directory, vol.name)
        try:
            if isinstance(vol, EmptyDirVolume):
                vdir.mkdir(parents=True, exist_ok=True)
            else:
                files = config_map_files(vol, config_maps.get(vol.config_map))
                if isinstance(files, MountError):
                    errors.append(files)
                    continue
                write_payload(vdir, files, now)
            ok.add(vol.name)
        except OSError as e:
            errors.append(MountError(vol.name, _os_error(e)))
    kinds = {v.name: v for v in plan.volumes}
    for m in plan.mounts:
        if m.volume not in ok:
            continue
        try:
            _link_mount(root, m, volume_dir(pod_directory, m.volume),
                        create_sub=isinstance(kinds[m.volume], EmptyDirVolume))
        except OSError as e:
            errors.append(MountError(m.volume, f"mount {m.mount_path}: {_os_error(e)}"))
    return errors


def refresh_config_maps(pod_directory: Path, plan: VolumePlan, config_maps: Mapping[str, Obj | None],
                        now: datetime) -> list[str]:
    """Rewrite the configMap volumes whose ConfigMap changed (the kubelet's
    periodic sync); a ConfigMap that is gone or unusable leaves its volume as it
    was. Returns the names of the volumes rewritten."""
    done = []
    for vol in plan.volumes:
        if not isinstance(vol, ConfigMapVolume) or vol.config_map not in config_maps:
            continue
        files = config_map_files(vol, config_maps[vol.config_map])
        if isinstance(files, MountError) or (config_maps[vol.config_map] is None and not files):
            continue
        try:
            if write_payload(volume_dir(pod_directory, vol.name), files, now):
                done.append(vol.name)
        except OSError:
            continue
    return done


def read_payload(vdir: Path) -> dict[str, tuple[bytes, int]] | None:
    """What ``..data`` holds now (relative path -> content, mode), None without it."""
    data = vdir / DATA_LINK
    if not data.is_symlink():
        return None
    base = data.resolve()
    out: dict[str, tuple[bytes, int]] = {}
    for dirpath, _, names in os.walk(base):
        for n in names:
            p = Path(dirpath) / n
            out[p.relative_to(base).as_posix()] = (p.read_bytes(), p.stat().st_mode & 0o7777)
    return out


def write_payload(vdir: Path, files: Mapping[str, tuple[bytes, int]], now: datetime) -> bool:
    """Make ``vdir`` hold exactly ``files``, atomically (the kubelet's atomic
    writer); False when it already did."""
    vdir.mkdir(parents=True, exist_ok=True)
    if read_payload(vdir) == dict(files):
        return False
    data = vdir / DATA_LINK
    old_target = os.readlink(data) if data.is_symlink() else None
    old_top = _top_level(vdir / old_target) if old_target else set()
    stamp = f"..{now.strftime('%Y_%m_%d_%H_%M_%S')}.{secrets.token_hex(4)}"
    new = vdir / stamp
    new.mkdir(mode=0o755)
    for rel, (content, mode) in files.items():
        path = new / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, content)
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
    _replace_symlink(data, stamp)
    new_top = {rel.split("/", 1)[0] for rel in files}
    for top in sorted(new_top):
        _replace_symlink(vdir / top, f"{DATA_LINK}/{top}")
    for top in old_top - new_top:
        link = vdir / top
        if link.is_symlink():
            link.unlink()
    if old_target and old_target != stamp:
        shutil.rmtree(vdir / old_target, ignore_errors=True)
    return True


def _top_level(d: Path) -> set[str]:
    try:
        return {p.name for p in d.iterdir()}
    except OSError:
        return set()


def _replace_symlink(link: Path, target: str) -> None:
    """Point ``link`` at ``target`` in one step (a new link renamed over the old)."""
    if link.is_symlink() and os.readlink(link) == target:
        return
    tmp = link.with_name(f".{link.name}.{secrets.token_hex(4)}.tmp")
    os.symlink(target, tmp)
    try:
        os.replace(tmp, link)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


def _link_mount(root: Path, m: Mount, vdir: Path, *, create_sub: bool) -> None:
    """``root/<mountPath>`` -> the volume (or its subPath; ``create_sub``: made
    when missing, as the kubelet does for an emptyDir; a configMap key that is
    not there leaves a dangling link). Parents are created as real
    directories; a symlink or file on the way is refused, so a mount never
    lands outside the root."""
    parts = m.relative.parts
    parent = root
    for part in parts[:-1]:
        parent = parent / part
        try:
            st = os.lstat(parent)
        except FileNotFoundError:
            os.mkdir(parent, 0o755)
            continue
        if not _is_real_dir(st.st_mode):
            raise NotADirectoryError(errno.ENOTDIR, "not a directory", str(parent))
    link = parent / parts[-1]
    target = vdir / m.sub_path if m.sub_path else vdir
    if m.sub_path and create_sub and not os.path.lexists(target):
        target.mkdir(parents=True, exist_ok=True)
    rel = os.path.relpath(target, parent)
    link_st: os.stat_result | None
    try:
        link_st = os.lstat(link)
    except FileNotFoundError:
        link_st = None
    if link_st is not None and _is_real_dir(link_st.st_mode):
        try:
            link.rmdir()  # an empty directory left where the mount goes
        except OSError:
            raise IsADirectoryError(errno.ENOTEMPTY, "a directory that is not empty is in the way",
                                    str(link)) from None
    elif link_st is not None and not os.path.islink(link):
        raise FileExistsError(errno.EEXIST, "a file is in the way", str(link))
    _replace_symlink(link, rel)


def _os_error(e: OSError) -> str:
    return f"{e.filename}: {e.strerror}" if e.filename and e.strerror else str(e)


def _is_real_dir(mode: int) -> bool:
    return stat.S_ISDIR(mode)
