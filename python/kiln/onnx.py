# SPDX-License-Identifier: Apache-2.0
"""The ONNX importer: ONNX models as kiln IR modules (one function, main).

    mod = kiln.onnx.from_onnx("model.onnx", shape={"x": [1, 3, 224, 224]})
    mod = kiln.onnx.from_onnx(onnx_model_proto)
"""
import os

from ._kiln import onnx as _onnx


def from_onnx(model, shape=None, keep_params_in_input=False):
    """The kiln IR of an ONNX model: a path, the serialized bytes, or an onnx.ModelProto.

    shape: {input name: shape} to fix input shapes (a batch size, say).
    keep_params_in_input: initializers become trailing parameters of main instead of constants.
    """
    shapes = {k: [int(d) for d in v] for k, v in (shape or {}).items()}
    if isinstance(model, (str, os.PathLike)):
        return _onnx.import_file(os.fspath(model), shapes, keep_params_in_input)
    if isinstance(model, (bytes, bytearray)):
        return _onnx.import_bytes(bytes(model), shapes, keep_params_in_input)
    if hasattr(model, "SerializeToString"):
        return _onnx.import_bytes(model.SerializeToString(), shapes, keep_params_in_input)
    raise TypeError("kiln.onnx.from_onnx: the model must be a path, bytes or an onnx.ModelProto, not "
                    + type(model).__name__)


__all__ = ["from_onnx"]
