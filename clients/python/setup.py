"""Builds the tidemark package, generating its gRPC stubs with grpcio-tools
(no generated code is committed) from the repository's proto/ directory, or,
in an unpacked sdist, from the copy of it the sdist carries."""

import os
import pathlib

import shutil

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = pathlib.Path(__file__).resolve().parent
PROTOS = ["types", "coordinator", "retention", "admin"]


def proto_root() -> pathlib.Path:
    """Where the .proto files are: $TIDEMARK_PROTO_ROOT, the copy inside an
    unpacked sdist, or the repository's proto/."""
    candidates = [os.environ.get("TIDEMARK_PROTO_ROOT"), HERE / "proto", HERE / ".." / ".." / "proto"]
    for candidate in filter(None, candidates):
        root = pathlib.Path(candidate).resolve()
        if (root / "tidemark" / "v1" / "types.proto").exists():
            return root
    raise SystemExit(
        "tidemark's proto files were not found (looked in $TIDEMARK_PROTO_ROOT, ./proto and ../../proto); "
        "build from the repository or from an sdist"
    )


class SdistWithProtos(sdist):
    """The sdist carries the .proto files it builds its stubs from."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        target = pathlib.Path(base_dir) / "proto" / "tidemark" / "v1"
        target.mkdir(parents=True, exist_ok=True)
        for name in PROTOS:
            shutil.copy2(proto_root() / "tidemark" / "v1" / f"{name}.proto", target / f"{name}.proto")


class BuildWithStubs(build_py):
    """Runs protoc (grpcio-tools) into the build tree as part of build_py."""

    def run(self):
        super().run()
        from grpc_tools import protoc  # a build requirement

        root = proto_root()
        out = pathlib.Path(self.build_lib)
        well_known = pathlib.Path(protoc.__file__).resolve().parent / "_proto"
        args = [
            "grpc_tools.protoc",
            f"-I{root}",
            f"-I{well_known}",
            f"--python_out={out}",
            f"--pyi_out={out}",
            f"--grpc_python_out={out}",
        ] + [str(root / "tidemark" / "v1" / f"{name}.proto") for name in PROTOS]
        if protoc.main(args) != 0:
            raise SystemExit("protoc failed to generate the tidemark stubs")
        (out / "tidemark" / "v1" / "__init__.py").write_text('"""Generated tidemark.v1 messages and stubs."""\n')


setup(cmdclass={"build_py": BuildWithStubs, "sdist": SdistWithProtos})
