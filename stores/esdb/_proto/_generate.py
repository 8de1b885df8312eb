"""Regenerate the test server's protobuf and gRPC modules from the ``.proto`` files here.

Run from the repository root with a virtual environment that has ``grpcio-tools``::

    .venv/bin/python stores/esdb/_proto/_generate.py

Generate with the oldest grpcio-tools the project supports (esdbclient's 1.71): the generated
code refuses an older protobuf or grpcio runtime than the one it was generated with, and
newer runtimes accept it. Each ``*_pb2.py`` is then pointed at this package's own descriptor
pool (see ``__init__.py``).
"""

from __future__ import annotations

import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[2]  # the repository root, where ``decider/stores`` links to ``stores``
PACKAGE = "decider/stores/esdb/_proto"
_DEFAULT_POOL = "_descriptor_pool.Default()"


def main() -> None:
    """Run protoc on every ``.proto`` here, then rewrite the generated modules' pool."""
    import grpc_tools
    from grpc_tools import protoc

    includes = pathlib.Path(grpc_tools.__file__).parent / "_proto"
    sources = sorted(f"{PACKAGE}/{p.name}" for p in HERE.glob("*.proto"))
    status = protoc.main(
        [
            "protoc",
            f"-I{ROOT}",
            f"-I{includes}",
            f"--python_out={ROOT}",
            f"--pyi_out={ROOT}",
            f"--grpc_python_out={ROOT}",
            *sources,
        ]
    )
    if status != 0:
        sys.exit(status)
    for module in HERE.glob("*_pb2.py"):
        text = module.read_text()
        if _DEFAULT_POOL not in text:
            raise SystemExit(f"{module.name}: no default pool to replace; protoc changed?")
        text = text.replace(_DEFAULT_POOL, "_pool.POOL", 1).replace(
            "from google.protobuf.internal import builder as _builder\n",
            "from google.protobuf.internal import builder as _builder\n"
            "from decider.stores.esdb import _proto as _pool\n",
            1,
        )
        module.write_text(text)
    for proto in HERE.glob("*.proto"):  # protoc writes a gRPC module even without a service
        if "\nservice " not in proto.read_text():
            (HERE / f"{proto.stem}_pb2_grpc.py").unlink()


if __name__ == "__main__":
    main()
