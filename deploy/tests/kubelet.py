"""A kubelet for one pod, without a cluster: enough of what Kubernetes and
the container runtime do to a pod to find a pod that would crash-loop.

Each container runs the real `tidemark` binary in a root filesystem of its
own (a private mount namespace and a chroot), assembled as the image and
the pod spec say:

- the image (from `deploy/Dockerfile`'s final stage): a distroless-like
  root with glibc, CA certificates and `/etc/passwd`, the binary at
  ENTRYPOINT's path, CMD as the default arguments, USER and WORKDIR (owned
  by the user when the Dockerfile creates it so);
- the pod: `command`/`args`/`workingDir` where the container sets them,
  `env` and `envFrom` (config maps and secrets resolved), every volume
  materialized as the kubelet does (secrets and config maps in the
  AtomicWriter layout: `..data` and per-key symlinks; modes from `items`
  and `defaultMode`; with `fsGroup`, files group-owned by it with group
  read added, directories setgid; emptyDirs 0777), mounted at their paths
  (read-only when asked), `readOnlyRootFilesystem`, and the user, group,
  `fsGroup` and supplemental groups from the security contexts.

It needs root (mount namespaces, chroot); the network is the host's.
"""

from __future__ import annotations

import base64
import ctypes
import json
import os
import pathlib
import shlex
import subprocess

CLONE_NEWNS = 0x00020000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
PR_SET_NO_NEW_PRIVS = 38


class Image:
    """The final stage of a Dockerfile: what a container starts from."""

    def __init__(self, dockerfile: pathlib.Path):
        self.entrypoint: list[str] = []
        self.cmd: list[str] = []
        self.user = "0"
        self.workdir = "/"
        self.env: dict[str, str] = {}
        # Directories the stage creates owned by someone (COPY --chown).
        self.owned_dirs: dict[str, str] = {}
        for instruction, rest in _instructions(dockerfile.read_text()):
            if instruction == "FROM":
                self.__init_stage()
            elif instruction == "ENTRYPOINT":
                self.entrypoint = _exec_form(rest)
            elif instruction == "CMD":
                self.cmd = _exec_form(rest)
            elif instruction == "USER":
                self.user = rest.strip()
            elif instruction == "WORKDIR":
                self.workdir = rest.strip()
            elif instruction == "ENV":
                for word in shlex.split(rest):
                    key, _, value = word.partition("=")
                    self.env[key] = value
            elif instruction == "COPY":
                words = shlex.split(rest)
                chown = next((w.split("=", 1)[1] for w in words if w.startswith("--chown=")), None)
                paths = [w for w in words if not w.startswith("--")]
                if chown and paths and paths[-1].endswith("/"):
                    self.owned_dirs[paths[-1].rstrip("/") or "/"] = chown

    def __init_stage(self) -> None:
        self.entrypoint, self.cmd, self.user, self.workdir = [], [], "0", "/"
        self.env, self.owned_dirs = {}, {}

    def uid_gid(self) -> tuple[int, int]:
        user, _, group = self.user.partition(":")
        return int(user), int(group or user)


def _instructions(text: str):
    logical = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not logical and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            logical += stripped[:-1] + " "
            continue
        logical += stripped
        instruction, _, rest = logical.partition(" ")
        yield instruction.upper(), rest
        logical = ""


def _exec_form(rest: str) -> list[str]:
    rest = rest.strip()
    return json.loads(rest) if rest.startswith("[") else ["/bin/sh", "-c", rest]


def secret_data(secret: dict) -> dict[str, bytes]:
    data = {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}
    data.update({k: v.encode() for k, v in (secret.get("stringData") or {}).items()})
    return data


def configmap_data(configmap: dict) -> dict[str, bytes]:
    data = {k: v.encode() for k, v in (configmap.get("data") or {}).items()}
    data.update({k: base64.b64decode(v) for k, v in (configmap.get("binaryData") or {}).items()})
    return data


class Pod:
    """One pod's spec, with the config maps and secrets it refers to
    (name -> key -> bytes), materialized under `scratch`."""

    def __init__(self, spec: dict, configmaps: dict, secrets: dict, scratch: pathlib.Path):
        self.spec = spec
        self.configmaps = configmaps
        self.secrets = secrets
        self.scratch = scratch
        self.context = spec.get("securityContext") or {}
        self.volumes = {v["name"]: self._materialize(v) for v in spec.get("volumes") or []}

    # -- volumes, as the kubelet writes them --------------------------------

    def _materialize(self, volume: dict) -> pathlib.Path:
        path = self.scratch / "volumes" / volume["name"]
        path.mkdir(parents=True)
        fs_group = self.context.get("fsGroup")
        if "secret" in volume or "configMap" in volume:
            source = volume.get("secret") or volume.get("configMap")
            name = source.get("secretName") or source.get("name")
            store = self.secrets if "secret" in volume else self.configmaps
            if name not in store:
                if source.get("optional"):
                    return path
                raise AssertionError(f"volume {volume['name']}: {name} does not exist (the pod would not start)")
            data = store[name]
            default_mode = source.get("defaultMode", 0o644)
            items = source.get("items") or [{"key": k, "path": k} for k in sorted(data)]
            self._atomic_write(path, [(i["path"], data[i["key"]], i.get("mode", default_mode)) for i in items], fs_group)
        elif "emptyDir" in volume:
            os.chmod(path, 0o777)
            if fs_group is not None:
                os.chown(path, 0, fs_group)
                os.chmod(path, 0o2777)
        else:
            raise AssertionError(f"volume {volume['name']}: this emulation has no {sorted(volume)} volumes")
        return path

    @staticmethod
    def _atomic_write(path: pathlib.Path, files, fs_group) -> None:
        # The kubelet's AtomicWriter: a timestamped directory, `..data`
        # pointing at it, and each key a symlink through `..data`, so an
        # update swaps one symlink.
        version = path / "..2026_01_01_00_00_00.000000000"
        version.mkdir()
        for relative, content, mode in files:
            target = version / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
            os.chown(target, 0, 0)
            if fs_group is not None:
                # SetVolumeOwnership on a read-only volume: group fsGroup,
                # group read added.
                os.chown(target, 0, fs_group)
                mode |= 0o440
            os.chmod(target, mode)
            first = relative.split("/")[0]
            if not (path / first).is_symlink():
                os.symlink(f"..data/{first}", path / first)
        for directory in [path, version]:
            if fs_group is not None:
                os.chown(directory, 0, fs_group)
                os.chmod(directory, 0o2755)
            else:
                os.chmod(directory, 0o755)
        os.symlink(version.name, path / "..data")

    # -- containers ----------------------------------------------------------

    def env(self, container: dict, image: Image) -> dict[str, str]:
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOSTNAME": "tidemark-0"}
        env.update(image.env)
        for source in container.get("envFrom") or []:
            prefix = source.get("prefix", "")
            if "configMapRef" in source:
                data = self.configmaps[source["configMapRef"]["name"]]
            else:
                data = self.secrets[source["secretRef"]["name"]]
            env.update({prefix + k: v.decode() for k, v in data.items()})
        for item in container.get("env") or []:
            if "value" in item:
                env[item["name"]] = item["value"]
                continue
            ref = item["valueFrom"]
            if "secretKeyRef" in ref:
                key = ref["secretKeyRef"]
                env[item["name"]] = self.secrets[key["name"]][key["key"]].decode()
            elif "configMapKeyRef" in ref:
                key = ref["configMapKeyRef"]
                env[item["name"]] = self.configmaps[key["name"]][key["key"]].decode()
            else:
                raise AssertionError(f"env {item['name']}: unsupported valueFrom {sorted(ref)}")
        return env

    def start(self, container: dict, image: Image, binary: pathlib.Path, log: pathlib.Path) -> subprocess.Popen:
        """Starts `container`; its output goes to `log`."""
        context = {**self.context, **(container.get("securityContext") or {})}
        image_uid, image_gid = image.uid_gid()
        uid = context.get("runAsUser", image_uid)
        gid = context.get("runAsGroup", image_gid if "runAsUser" not in context else 0)
        if context.get("runAsNonRoot") and uid == 0:
            raise AssertionError(f"{container['name']}: runAsNonRoot, but it would run as root")
        groups = list(self.context.get("supplementalGroups") or [])
        if self.context.get("fsGroup") is not None:
            groups.append(self.context["fsGroup"])
        argv = (container.get("command") or image.entrypoint) + (
            container.get("args") if "args" in container else ([] if "command" in container else image.cmd)
        )
        workdir = container.get("workingDir") or image.workdir
        root = self.scratch / f"root-{container['name']}"
        root.mkdir()
        plan = _root_plan(image, binary, workdir, uid, gid)
        for mount in container.get("volumeMounts") or []:
            source = self.volumes[mount["name"]]
            if mount.get("subPath"):
                source = source / mount["subPath"]
            plan.append(("bind", str(source), mount["mountPath"], bool(mount.get("readOnly"))))
        plan.append(("root-readonly",) if context.get("readOnlyRootFilesystem") else ("noop",))
        no_new_privs = context.get("allowPrivilegeEscalation") is False
        with open(log, "ab") as out:
            return subprocess.Popen(
                argv,
                env=self.env(container, image),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=lambda: _enter(str(root), plan, workdir, uid, gid, groups, no_new_privs),
                close_fds=True,
            )


def _root_plan(image: Image, binary: pathlib.Path, workdir: str, uid: int, gid: int) -> list:
    """The image's root filesystem: what distroless cc carries (glibc and
    libgcc, CA certificates, passwd and group with nonroot 65532, a /tmp),
    the binary at ENTRYPOINT's path, and the WORKDIR."""
    plan: list = []
    for path in ["/lib", "/lib64", "/bin", "/sbin"]:
        if os.path.islink(path):
            plan.append(("symlink", os.readlink(path), path))
        elif os.path.isdir(path):
            plan.append(("bind", path, path, True))
    plan.append(("bind", "/usr/lib", "/usr/lib", True))
    if os.path.isdir("/usr/lib64"):
        plan.append(("bind", "/usr/lib64", "/usr/lib64", True))
    plan.append(("bind", "/etc/ssl", "/etc/ssl", True))
    plan.append(
        (
            "file",
            "/etc/passwd",
            "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n",
        )
    )
    plan.append(("file", "/etc/group", "root:x:0:\nnonroot:x:65532:\n"))
    plan.append(("dir", "/tmp", 0o1777, 0, 0))
    plan.append(("dir", "/home/nonroot", 0o700, 65532, 65532))
    plan.append(("proc", "/proc"))
    plan.append(("bind", "/dev", "/dev", False))
    plan.append(("binary", str(binary), image.entrypoint[0]))
    for directory, owner in image.owned_dirs.items():
        user, _, group = owner.partition(":")
        plan.append(("dir", directory, 0o755, int(user), int(group or user)))
    if workdir not in image.owned_dirs:
        # WORKDIR makes a missing directory owned by root.
        plan.append(("dir", workdir, 0o755, 0, 0))
    return plan


def _enter(root, plan, workdir, uid, gid, groups, no_new_privs) -> None:
    """In the child, before exec: a private mount namespace, the root
    filesystem, chroot, and the pod's identity."""
    libc = ctypes.CDLL(None, use_errno=True)

    def check(result, what):
        if result != 0:
            error = ctypes.get_errno()
            os.write(2, f"kubelet emulation: {what}: {os.strerror(error)}\n".encode())
            os._exit(127)

    def mount(source, target, fstype, flags, data=None):
        return libc.mount(
            source.encode() if source else None,
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        )

    def inside(path):
        return root + path

    check(libc.unshare(CLONE_NEWNS), "unshare")
    check(mount(None, "/", None, MS_REC | MS_PRIVATE), "make / private")
    check(mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755"), "tmpfs root")
    for step in plan:
        kind = step[0]
        if kind == "symlink":
            os.makedirs(os.path.dirname(inside(step[2])), exist_ok=True)
            os.symlink(step[1], inside(step[2]))
        elif kind in ("bind", "binary"):
            source, target = step[1], inside(step[2])
            if os.path.isdir(source):
                os.makedirs(target, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                open(target, "a").close()
            check(mount(source, target, None, MS_BIND | MS_REC), f"bind {source} on {step[2]}")
            if kind == "binary" or step[3]:
                check(mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY), f"read-only {step[2]}")
        elif kind == "file":
            os.makedirs(os.path.dirname(inside(step[1])), exist_ok=True)
            with open(inside(step[1]), "w") as f:
                f.write(step[2])
        elif kind == "dir":
            os.makedirs(inside(step[1]), exist_ok=True)
            os.chown(inside(step[1]), step[3], step[4])
            os.chmod(inside(step[1]), step[2])
        elif kind == "proc":
            os.makedirs(inside(step[1]), exist_ok=True)
            check(mount("proc", inside(step[1]), "proc", MS_NOSUID | MS_NODEV), "proc")
        elif kind == "root-readonly":
            check(mount(None, root, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV), "read-only root")
    os.chroot(root)
    os.chdir(workdir)
    os.setgroups(groups)
    os.setgid(gid)
    os.setuid(uid)
    if no_new_privs:
        check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
