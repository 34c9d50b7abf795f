"""Builds the tidemark package, generating its gRPC stubs from the
repository's proto/ directory with grpcio-tools (no generated code is
committed)."""

import os
import pathlib

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = pathlib.Path(__file__).resolve().parent
PROTO_ROOT = pathlib.Path(os.environ.get("TIDEMARK_PROTO_ROOT", HERE / ".." / ".." / "proto")).resolve()
PROTOS = ["types", "coordinator", "retention", "admin"]


class BuildWithStubs(build_py):
    """Runs protoc (grpcio-tools) into the build tree as part of build_py."""

    def run(self):
        super().run()
        from grpc_tools import protoc  # a build requirement

        if not (PROTO_ROOT / "tidemark" / "v1" / "types.proto").exists():
            raise SystemExit(
                f"tidemark's proto files are not at {PROTO_ROOT}; build from the repository "
                "or set TIDEMARK_PROTO_ROOT"
            )
        out = pathlib.Path(self.build_lib)
        well_known = pathlib.Path(protoc.__file__).resolve().parent / "_proto"
        args = [
            "grpc_tools.protoc",
            f"-I{PROTO_ROOT}",
            f"-I{well_known}",
            f"--python_out={out}",
            f"--pyi_out={out}",
            f"--grpc_python_out={out}",
        ] + [str(PROTO_ROOT / "tidemark" / "v1" / f"{name}.proto") for name in PROTOS]
        if protoc.main(args) != 0:
            raise SystemExit("protoc failed to generate the tidemark stubs")
        (out / "tidemark" / "v1" / "__init__.py").write_text('"""Generated tidemark.v1 messages and stubs."""\n')


setup(cmdclass={"build_py": BuildWithStubs})
