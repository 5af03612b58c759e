# SPDX-License-Identifier: Apache-2.0
"""The ONNX importer: ONNX models as kiln IR modules (one function, main).

    mod = kiln.onnx.from_onnx("model.onnx", shape={"x": [1, 3, 224, 224]})
    mod = kiln.onnx.from_onnx(onnx_model_proto)
"""
import os

from ._kiln import onnx as _onnx


def from_onnx(model, shape=None, keep_params_in_input=False, upper_bound=None, map_weights=True):
    """The kiln IR of an ONNX model: a path, the serialized bytes, or an onnx.ModelProto.

    shape: {input name: shape} to fix input shapes (a batch size, say).
    keep_params_in_input: initializers become trailing parameters of main instead of constants.
    upper_bound: {dimension name: bound} for symbolic dimensions (main's tir_var_upper_bound, as
        TVM's from_onnx callers set it): memory is planned for the largest sizes.
    map_weights: for a path, the large weights (64 KiB and more) stay in the file, mapped
        read-only, until the compiler packs or copies them, so that they are never in memory
        twice. The file must not be truncated or written in place while the module is in use
        (replacing it by renaming a new file over it is safe). False reads them into memory.
    """
    shapes = {k: [int(d) for d in v] for k, v in (shape or {}).items()}
    bounds = {k: int(v) for k, v in (upper_bound or {}).items()}
    if isinstance(model, (str, os.PathLike)):
        return _onnx.import_file(os.fspath(model), shapes, keep_params_in_input, bounds, map_weights)
    if isinstance(model, (bytes, bytearray)):
        return _onnx.import_bytes(bytes(model), shapes, keep_params_in_input, bounds)
    if hasattr(model, "SerializeToString"):
        return _onnx.import_bytes(model.SerializeToString(), shapes, keep_params_in_input, bounds)
    raise TypeError("kiln.onnx.from_onnx: the model must be a path, bytes or an onnx.ModelProto, not "
                    + type(model).__name__)


__all__ = ["from_onnx"]
